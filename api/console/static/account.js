// Airlock console: the tenant's account. Its keys (GET, POST and DELETE
// /v1/keys), its usage of each quota (GET /v1/usage) and its events
// (abuse events from GET /v1/events; session events from its sessions).
'use strict';

// ---------- keys ----------

// thisKey reports whether k is the key this tab signed in with (its
// prefix is the start of the secret).
function thisKey(k) { return !!k.prefix && key().startsWith(k.prefix); }

async function renderKeys(signal) {
  show(h('h1', {}, 'API keys'), h('p', { class: 'muted' }, 'Loading…'));
  const list = await getJSON('v1/keys', null, signal);
  const err = h('div', { id: 'keys-error' });
  const created = h('div', { id: 'new-key' });
  const rows = list.keys.map(k => {
    const revoked = !!k.revoked_at;
    const expired = k.expires_at && new Date(k.expires_at) < new Date();
    const state = revoked ? 'revoked' : expired ? 'expired' : 'active';
    const revoke = revoked ? null : confirming('Revoke', thisKey(k) ? 'Revoke the key this tab is signed in with? You will be signed out.' : `Revoke ${k.name || k.key_id}? Clients using it are refused at once.`,
      { class: 'danger small', 'data-revoke': k.key_id }, async yes => {
        await action(yes, err, async () => {
          await send('DELETE', 'v1/keys/' + encodeURIComponent(k.key_id));
          announce('Key revoked');
          if (key()) render(); // revoking this tab's own key signs out on the next call
        });
      });
    return h('tr', { 'data-key': k.key_id },
      h('td', { class: 'wrap' }, k.name || h('span', { class: 'muted' }, '(no name)'), thisKey(k) ? h('span', { class: 'muted this-key' }, ' (this tab)') : null),
      h('td', {}, h('code', {}, k.prefix + '…')),
      h('td', {}, badge(state)),
      h('td', { class: 'hide-narrow' }, k.role || ''),
      h('td', { class: 'hide-narrow' }, when(k.created_at)),
      h('td', { class: 'hide-narrow' }, k.expires_at ? when(k.expires_at) : 'never'),
      h('td', { class: 'hide-narrow' }, k.last_used_at ? when(k.last_used_at) : 'never'),
      h('td', {}, revoked ? when(k.revoked_at) : revoke));
  });
  const name = h('input', { id: 'key-name', name: 'name', required: true, autocomplete: 'off', spellcheck: 'false', placeholder: 'e.g. ci' });
  const days = h('input', { id: 'key-days', name: 'days', type: 'number', min: 1, step: 1, placeholder: 'never' });
  const format = h('select', { id: 'key-format', name: 'format' }, h('option', { value: '' }, 'airlock (alk_…)'), h('option', { value: 'e2b' }, 'e2b (for E2B SDKs)'));
  const submit = h('button', { type: 'submit', 'data-busy': 'Creating…' }, 'Create key');
  const form = h('form', {
    class: 'card toolbar', id: 'create-key', onsubmit: ev => {
      ev.preventDefault();
      const req = { name: name.value.trim() };
      if (days.value) req.expires_at = new Date(Date.now() + Number(days.value) * 86400e3).toISOString();
      if (format.value) req.format = format.value;
      action(submit, err, async () => {
        const k = await send('POST', 'v1/keys', req);
        await renderKeys(signal); // the list with the new key, then its secret, once
        const box = document.getElementById('new-key');
        const secret = h('input', { id: 'new-key-secret', readonly: true, value: k.key, 'aria-label': 'The new key', spellcheck: 'false', autocomplete: 'off' });
        box.replaceChildren(h('div', { class: 'card secret', role: 'status' },
          h('p', {}, h('strong', {}, `Key ${k.name} created.`), ' Copy it now: it is shown this once and cannot be read again.'),
          secret,
          h('button', { type: 'button', class: 'quiet', onclick: () => { box.replaceChildren(); } }, 'Done')));
        secret.focus();
        secret.select();
        announce('Key created');
      });
    },
  },
  h('h2', { class: 'full' }, 'New key'),
  h('label', { for: 'key-name' }, 'Name', name),
  h('label', { for: 'key-days' }, 'Expires in (days)', days),
  h('label', { for: 'key-format' }, 'Format', format),
  submit);
  show(
    h('h1', {}, 'API keys'),
    h('p', { class: 'muted' }, 'Keys of this tenant. To rotate one: create a new key, move clients to it, revoke the old one. A secret is shown once, when its key is made.'),
    form, created, err,
    list.keys.length ? table([['Name'], ['Prefix'], ['State'], ['Role', 'hide-narrow'], ['Created', 'hide-narrow'], ['Expires', 'hide-narrow'], ['Last used', 'hide-narrow'], ['Revoke']],
      rows, 'API keys') : h('p', { class: 'muted' }, 'No keys.'));
  announce(`${list.keys.length} keys`);
}

// ---------- usage ----------

// amount renders a quota's number in its unit.
function amount(n, unit) {
  if (n === undefined || n === null) return '';
  switch (unit) {
    case 'bytes': return bytes(n);
    case 'millivcpu': return (n / 1000).toFixed(n % 1000 ? 1 : 0) + ' vCPU';
    case 'seconds': return n >= 3600 ? (n / 3600).toFixed(1) + ' h' : n + ' s';
    default: return `${n} ${unit || ''}`.trim();
  }
}

async function renderUsage(signal) {
  show(h('h1', {}, 'Usage and quotas'), h('p', { class: 'muted' }, 'Loading…'));
  const u = await getJSON('v1/usage', null, signal);
  const rows = (u.quotas || []).map(q => {
    const unlimited = q.limit < 0;
    const pct = unlimited || !q.limit ? 0 : Math.min(100, 100 * q.used / q.limit);
    return h('tr', { 'data-quota': q.quota },
      h('td', {}, q.quota),
      h('td', {}, q.window),
      h('td', { class: 'used' }, amount(q.used, q.unit)),
      h('td', { class: 'limit' }, unlimited ? 'no limit' : amount(q.limit, q.unit)),
      h('td', { class: 'hide-narrow' }, unlimited ? '' : amount(q.remaining, q.unit)),
      h('td', { class: 'hide-narrow' }, unlimited ? '' : h('meter', { min: 0, max: 100, low: 70, high: 90, optimum: 0, value: pct.toFixed(1), 'aria-label': `${q.quota}: ${pct.toFixed(0)}% used` })),
      h('td', { class: 'hide-narrow' }, q.source || ''),
      h('td', { class: 'hide-narrow' }, q.resets_at ? when(q.resets_at) : ''));
  });
  show(
    h('h1', {}, 'Usage and quotas'),
    h('p', { class: 'muted' }, `This tenant's use of each of its quotas, at ${when(u.at)}. "concurrent" counts what is held now; "minute" the last 60 seconds; "day" the UTC day.`),
    rows.length ? table([['Quota'], ['Window'], ['Used'], ['Limit'], ['Remaining', 'hide-narrow'], ['', 'hide-narrow'], ['Limit from', 'hide-narrow'], ['Resets', 'hide-narrow']], rows, 'Quotas')
      : h('p', { class: 'muted' }, 'No quotas.'));
  announce(`${rows.length} quotas`);
}

// ---------- events ----------

// renderEvents shows the tenant's abuse events (paged by ?before=) and
// the events of its sessions: created, paused, ended with the reason
// (paged by ?sessions_before=).
async function renderEvents(signal, params) {
  show(h('h1', {}, 'Events'), h('p', { class: 'muted' }, 'Loading…'));
  const [ev, sp] = await Promise.all([
    getJSON('v1/events', { limit: 50, before: params.get('before') || '' }, signal),
    getJSON('v1/sessions', { state: 'all', limit: 50, before: params.get('sessions_before') || '' }, signal)]);
  const abuse = ev.events.map(e => h('tr', { 'data-event': e.event_id },
    h('td', {}, when(e.time)),
    h('td', {}, badge(e.detector)),
    h('td', { class: 'wrap' }, e.summary),
    h('td', {}, e.action),
    h('td', {}, e.session_id ? h('a', { href: '#/sessions/' + encodeURIComponent(e.session_id) }, e.session_id)
      : e.execution_id ? h('a', { href: '#/executions/' + encodeURIComponent(e.execution_id) }, e.execution_id) : ''),
    h('td', { class: 'wrap hide-narrow' }, e.evidence ? h('details', {}, h('summary', {}, 'evidence'), h('pre', {}, JSON.stringify(e.evidence, null, 2))) : '')));
  const sessionEvents = [];
  for (const s of sp.sessions) {
    sessionEvents.push({ t: s.created_at, s, what: 'created', note: `${s.image}, ${s.size}` });
    if (s.paused_at) sessionEvents.push({ t: s.paused_at, s, what: 'paused', note: 'files and processes kept' });
    if (s.ended_at) sessionEvents.push({ t: s.ended_at, s, what: s.state, note: (s.end_reason || '') + (s.end_detail ? ': ' + s.end_detail : '') });
  }
  sessionEvents.sort((a, b) => new Date(b.t) - new Date(a.t));
  const srows = sessionEvents.map(e => h('tr', {},
    h('td', {}, when(e.t)),
    h('td', {}, h('a', { href: '#/sessions/' + encodeURIComponent(e.s.session_id) }, e.s.session_id)),
    h('td', {}, badge(e.what)),
    h('td', { class: 'wrap' }, e.note)));
  const keep = (k, v) => { const q = new URLSearchParams(params); q.set(k, v); return '#/events?' + q.toString(); };
  show(
    h('h1', {}, 'Events'),
    h('section', { 'aria-labelledby': 'abuse-h' }, h('h2', { id: 'abuse-h' }, 'Abuse events'),
      h('p', { class: 'muted' }, 'What the abuse detectors found in this tenant\'s sandboxes (mining, scanning, fork bombs) and what they did.'),
      abuse.length ? table([['Time'], ['Detector'], ['Summary'], ['Action'], ['Of'], ['Evidence', 'hide-narrow']], abuse, 'Abuse events, newest first')
        : h('p', { class: 'muted', id: 'no-abuse' }, 'No abuse events.'),
      ev.next_cursor ? h('p', { class: 'pager' }, h('a', { href: keep('before', ev.next_cursor) }, 'Older abuse events')) : null),
    h('section', { 'aria-labelledby': 'sev-h' }, h('h2', { id: 'sev-h' }, 'Session events'),
      h('p', { class: 'muted' }, 'When this tenant\'s sessions were created, paused and ended, and why they ended.'),
      srows.length ? h('div', { id: 'session-events' }, table([['Time'], ['Session'], ['Event'], ['Detail']], srows, 'Session events, newest first'))
        : h('p', { class: 'muted' }, 'No sessions.'),
      sp.next_cursor ? h('p', { class: 'pager' }, h('a', { href: keep('sessions_before', sp.next_cursor) }, 'Older sessions\' events')) : null));
  announce(`${ev.events.length} abuse events, ${sessionEvents.length} session events`);
}
