// Airlock console: sign in and the page router. It loads last: the pages
// are in core.js, executions.js, sessions.js, snapshots.js, templates.js,
// volumes.js, account.js, events.js, webhooks.js and egress.js.
'use strict';

let view = null; // the AbortController of the page shown
let signInMessage = ''; // why the tab was signed out, until it signs in again

// ---------- sign in ----------

function signOut(message) {
  sessionStorage.removeItem(KEY);
  signInMessage = message || '';
  if (location.hash !== '#/signin') location.hash = '#/signin'; // renders on hashchange
  else render();
}

function renderSignIn(message) {
  const input = h('input', { id: 'key', type: 'password', autocomplete: 'off', required: true, spellcheck: 'false' });
  const err = h('p', { class: 'error', role: 'alert', id: 'signin-error' }, message || signInMessage);
  const form = h('form', {
    class: 'card signin', onsubmit: async ev => {
      ev.preventDefault();
      const k = input.value.trim();
      if (!k) return;
      sessionStorage.setItem(KEY, k);
      try {
        await call('v1/executions', { limit: 1 }, { signingIn: true });
        signInMessage = '';
        location.hash = '#/executions';
      } catch (e) {
        sessionStorage.removeItem(KEY);
        err.textContent = e.status === 401 ? 'That key was refused.' : e.message;
        input.focus();
      }
    },
  },
  h('h1', {}, 'Sign in'),
  h('p', { class: 'muted' }, 'Your tenant\'s API key. It stays in this browser tab (session storage) and is sent only to this server, in a header.'),
  h('label', { for: 'key' }, 'API key'), input,
  h('button', { type: 'submit' }, 'Sign in'), err);
  show(form);
  input.focus();
}

// ---------- routing ----------

const pages = {
  executions: (signal, parts, params) => parts[1] ? renderExecution(signal, parts[1]) : renderExecutions(signal, params.get('before')),
  sessions: (signal, parts, params) => parts[1] ? renderSession(signal, parts[1]) : renderSessions(signal, params),
  snapshots: (signal, parts, params) => renderSnapshots(signal, params),
  templates: (signal, parts) => parts[1] ? renderTemplate(signal, parts[1]) : renderTemplates(signal),
  volumes: signal => renderVolumes(signal),
  webhooks: (signal, parts, params) => parts[1] ? renderWebhook(signal, parts[1], params) : renderWebhooks(signal),
  keys: signal => renderKeys(signal),
  usage: signal => renderUsage(signal),
  events: (signal, parts, params) => renderEvents(signal, params),
  egress: (signal, parts, params) => renderEgress(signal, params),
};

function render(message, moveFocus) {
  if (view) view.abort();
  const ctl = new AbortController();
  view = ctl;
  const hash = location.hash || '#/executions';
  const [path, query] = hash.slice(1).split('?');
  const params = new URLSearchParams(query || '');
  const parts = path.split('/').filter(Boolean).map(decodeURIComponent);
  const signedIn = !!key();
  document.getElementById('nav').hidden = !signedIn;
  document.getElementById('signout').hidden = !signedIn;
  for (const a of document.querySelectorAll('#nav a')) {
    if (a.dataset.section === parts[0]) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
  if (!signedIn || parts[0] === 'signin') {
    if (signedIn) { location.hash = '#/executions'; return; }
    renderSignIn(message);
    return;
  }
  const page = pages[parts[0]] || pages.executions;
  // After a move within the page, focus goes to the new content (so a
  // screen reader reads it); on the first load it stays at the top.
  page(ctl.signal, parts, params).then(() => { if (moveFocus) main.focus({ preventScroll: true }); }, err => {
    if (err.name === 'AbortError' || ctl.signal.aborted) return;
    show(errorBox(err));
  });
}

document.getElementById('signout').addEventListener('click', () => signOut('Signed out.'));
window.addEventListener('hashchange', () => render(undefined, true));
render();
