// Airlock console: templates (GET, POST and DELETE /v1/templates). The
// list with forms that build one from a Dockerfile (with an optional
// build context, uploaded first to POST /v1/templates/contexts) or
// import one from an image reference; a template's page with its facts,
// its build log streamed while it builds (GET /v1/templates/{name}/logs,
// server-sent events), and its actions: start a session from it, delete
// it (409 template-in-use while sessions use it).
'use strict';

// templatePath is the API path of a template.
function templatePath(name) { return 'v1/templates/' + encodeURIComponent(name); }

// templateSource says what a template was made from, as text.
function templateSource(t) {
  switch (t.source) {
    case 'image': return 'image ' + (t.from_image || '');
    case 'session': return 'session ' + (t.session_id || '');
    default: return t.source || '';
  }
}

// startFromTemplate starts a session from the template and opens it.
async function startFromTemplate(name) {
  const s = await send('POST', 'v1/sessions', { template: name });
  announce(`Session ${s.session_id} started from ${name}`);
  location.hash = '#/sessions/' + encodeURIComponent(s.session_id);
}

// deleteTemplate is a button that deletes the template after asking;
// done runs after it is gone. A refusal (409 while sessions use it) is
// shown in err.
function deleteTemplateButton(name, err, done) {
  return confirming('Delete', `Delete template ${name}?`, { class: 'danger small', 'data-delete-template': name }, async yes => {
    await action(yes, err, async () => {
      await send('DELETE', templatePath(name));
      announce(`Template ${name} deleted`);
      done();
    });
  });
}

async function renderTemplates(signal) {
  show(h('h1', {}, 'Templates'), h('p', { class: 'muted' }, 'Loading…'));
  const list = await getJSON('v1/templates', null, signal);
  const err = h('div', { id: 'templates-error' });
  const rows = list.templates.map(t => {
    const start = h('button', { type: 'button', class: 'small', 'data-busy': 'Starting…', 'data-start-template': t.name,
      disabled: t.status !== 'ready', onclick: () => action(start, err, () => startFromTemplate(t.name)) }, 'Start session');
    return h('tr', { 'data-template': t.name },
      h('td', { class: 'wrap' }, h('a', { href: '#/templates/' + encodeURIComponent(t.name) }, t.name)),
      h('td', {}, badge(t.status)),
      h('td', { class: 'wrap' }, templateSource(t)),
      h('td', {}, bytes(t.size_bytes)),
      h('td', { class: 'hide-narrow' }, when(t.created_at)),
      h('td', { class: 'hide-narrow' }, t.tenant_id ? 'this tenant' : 'operator'),
      h('td', {}, h('span', { class: 'actions' }, start, t.tenant_id ? deleteTemplateButton(t.name, err, () => render()) : null)));
  });
  show(
    h('h1', {}, 'Templates'),
    h('p', { class: 'muted' }, 'A template is an image of your own: built from a Dockerfile in a sandbox, imported from a registry, or made from a session. Sessions and runs start from it by name.'),
    h('div', { class: 'grid2' }, buildForm(), importForm()),
    h('h2', {}, 'Your templates and the operator\'s'),
    err,
    rows.length ? table([['Name'], ['Status'], ['Source'], ['Size'], ['Created', 'hide-narrow'], ['Owner', 'hide-narrow'], ['']], rows, 'Templates')
      : h('p', { class: 'muted', id: 'no-templates' }, 'No templates.'));
  announce(`${rows.length} templates`);
}

// templateField is a labelled input of a template form.
function templateField(id, label, input, hint) {
  return h('label', { for: id }, label, input, hint ? h('small', { class: 'muted' }, hint) : null);
}

// buildForm builds a template from a pasted Dockerfile, with a build
// context (a tar) uploaded first when one is chosen; it then opens the
// template's page, where the build log streams.
function buildForm() {
  const err = h('div', { id: 'build-error' });
  const name = h('input', { id: 'build-name', name: 'name', required: true, spellcheck: 'false', autocomplete: 'off', placeholder: 'e.g. my-tools' });
  const dockerfile = h('textarea', { id: 'build-dockerfile', name: 'dockerfile', rows: 8, required: true, spellcheck: 'false', placeholder: 'FROM base\nRUN …' });
  const ctx = h('input', { id: 'build-context', name: 'context', type: 'file', accept: '.tar,application/x-tar' });
  const start = h('input', { id: 'build-start', name: 'start_cmd', spellcheck: 'false', autocomplete: 'off', placeholder: 'none' });
  const ready = h('input', { id: 'build-ready', name: 'ready_cmd', spellcheck: 'false', autocomplete: 'off', placeholder: 'none' });
  const submit = h('button', { type: 'submit', 'data-busy': 'Starting the build…' }, 'Build');
  const form = h('form', {
    class: 'card toolbar', id: 'build-template', 'aria-labelledby': 'build-h', onsubmit: ev => {
      ev.preventDefault();
      const req = { name: name.value.trim(), dockerfile: dockerfile.value };
      if (start.value.trim()) req.start_cmd = start.value.trim();
      if (ready.value.trim()) req.ready_cmd = ready.value.trim();
      action(submit, err, async () => {
        const f = ctx.files[0];
        if (f) {
          const up = await (await call('v1/templates/contexts', null, { method: 'POST', body: f, headers: { 'Content-Type': 'application/x-tar' } })).json();
          req.context = up.context_id;
        }
        const t = await send('POST', 'v1/templates', req);
        announce(`Building ${t.name}`);
        location.hash = '#/templates/' + encodeURIComponent(t.name);
      });
    },
  },
  h('h2', { id: 'build-h', class: 'full' }, 'Build from a Dockerfile'),
  templateField('build-name', 'Name', name),
  h('label', { for: 'build-dockerfile', class: 'full' }, 'Dockerfile', dockerfile,
    h('small', { class: 'muted' }, 'FROM (a template, base, python-ds or a registry image), RUN, COPY, ADD, ENV, ARG, WORKDIR, USER. RUN steps run in a sandbox.')),
  templateField('build-context', 'Build context (a tar, optional)', ctx),
  templateField('build-start', 'Start command', start),
  templateField('build-ready', 'Ready command', ready),
  submit, err);
  return form;
}

// importForm imports a template from an image reference in a registry,
// with an optional username and password for that one pull.
function importForm() {
  const err = h('div', { id: 'import-error' });
  const name = h('input', { id: 'import-name', name: 'name', required: true, spellcheck: 'false', autocomplete: 'off', placeholder: 'e.g. node20' });
  const ref = h('input', { id: 'import-ref', name: 'from_image', required: true, spellcheck: 'false', autocomplete: 'off', placeholder: 'registry.example.com/repo:tag' });
  const user = h('input', { id: 'import-user', name: 'username', spellcheck: 'false', autocomplete: 'off', placeholder: 'anonymous' });
  const pass = h('input', { id: 'import-pass', name: 'password', type: 'password', autocomplete: 'off' });
  const submit = h('button', { type: 'submit', 'data-busy': 'Starting the import…' }, 'Import');
  const form = h('form', {
    class: 'card toolbar', id: 'import-template', 'aria-labelledby': 'import-h', onsubmit: ev => {
      ev.preventDefault();
      const req = { name: name.value.trim(), from_image: ref.value.trim() };
      if (user.value || pass.value) req.registry_auth = { username: user.value, password: pass.value };
      action(submit, err, async () => {
        const t = await send('POST', 'v1/templates', req);
        pass.value = '';
        announce(`Importing ${t.name}`);
        location.hash = '#/templates/' + encodeURIComponent(t.name);
      });
    },
  },
  h('h2', { id: 'import-h', class: 'full' }, 'Import an image'),
  templateField('import-name', 'Name', name),
  templateField('import-ref', 'Image reference', ref),
  templateField('import-user', 'Registry username', user),
  templateField('import-pass', 'Registry password', pass, 'Used for this pull only; never stored.'),
  submit, err);
  return form;
}

// templateFacts are a template's fields, as text.
function templateFacts(t) {
  const list = [
    ['Status', h('span', { id: 'template-status' }, badge(t.status))],
    ['Source', templateSource(t)],
    ['Owner', t.tenant_id ? 'this tenant' : 'the operator (every tenant sees it)'],
    ['Size', bytes(t.size_bytes)], ['Created', when(t.created_at)],
  ];
  if (t.ready_at) list.push(['Ready', when(t.ready_at)]);
  if (t.reason) list.push(['Reason', h('span', { id: 'template-reason' }, t.reason)]);
  if (t.failed_line) list.push(['Failed line', String(t.failed_line)]);
  if (t.digest) list.push(['Digest', h('code', {}, t.digest)]);
  if (t.image_hash) list.push(['Image', h('code', {}, t.image_hash)]);
  if (t.start_cmd) list.push(['Start command', h('code', {}, t.start_cmd)]);
  if (t.ready_cmd) list.push(['Ready command', h('code', {}, t.ready_cmd)]);
  if (t.workdir) list.push(['Workdir', t.workdir]);
  if (t.user) list.push(['User', t.user]);
  if (t.env && t.env.length) list.push(['Environment', h('code', {}, t.env.join('\n'))]);
  if (t.session_id) list.push(['From session', h('a', { href: '#/sessions/' + encodeURIComponent(t.session_id) }, t.session_id)]);
  if (t.memory_snapshot_id) list.push(['Memory snapshot', t.memory_snapshot_id]);
  list.push(['ID', t.template_id]);
  return list;
}

async function renderTemplate(signal, name) {
  show(h('h1', {}, 'Template'), h('p', { class: 'muted' }, 'Loading…'));
  const t = await getJSON(templatePath(name), null, signal);
  const err = h('div', { id: 'template-error' });
  const factsBox = h('section', { class: 'card', 'aria-labelledby': 'tfacts-h' }, h('h2', { id: 'tfacts-h' }, 'Template'), facts(templateFacts(t)));
  const log = h('pre', { id: 'template-log', tabindex: 0, 'aria-label': 'Build log' });
  const logState = h('p', { class: 'muted', id: 'template-log-state' }, 'Reading the build log…');
  const start = h('button', { type: 'button', id: 'template-start', 'data-busy': 'Starting…', disabled: t.status !== 'ready',
    onclick: () => action(start, err, () => startFromTemplate(t.name)) }, 'Start a session');
  show(
    h('p', { class: 'crumbs' }, h('a', { href: '#/templates' }, '← Templates')),
    h('h1', {}, `Template ${t.name}`),
    h('div', { class: 'card' }, h('div', { class: 'actions', id: 'template-actions' }, start,
      t.tenant_id ? deleteTemplateButton(t.name, err, () => { location.hash = '#/templates'; }) : null), err),
    factsBox,
    h('section', { 'aria-labelledby': 'tlog-h' }, h('h2', { id: 'tlog-h' }, 'Build log'), logState, log));
  announce(`Template ${t.name}, ${t.status}`);
  followTemplateLog(t, log, logState, factsBox, start, signal);
}

// followTemplateLog streams the build log into out: what is kept, then
// what the build writes until it ends; then the template's facts are
// read again.
async function followTemplateLog(t, out, state, factsBox, start, signal) {
  const dec = new TextDecoder();
  const MAX_NODES = 4000;
  const append = text => {
    if (!text) return;
    out.append(document.createTextNode(text));
    while (out.childNodes.length > MAX_NODES) out.firstChild.remove();
    out.scrollTop = out.scrollHeight;
  };
  let ended = false;
  try {
    const resp = await call(templatePath(t.name) + '/logs', null, { signal, headers: { Accept: 'text/event-stream' } });
    await readEvents(resp, (name, d) => {
      switch (name) {
        case 'template': state.textContent = d.status === 'building' ? 'Building: the log follows as the build writes it.' : 'The build log:'; break;
        case 'log': append(dec.decode(chunkBytes(d), { stream: true })); break;
        case 'end':
          ended = true;
          append(dec.decode());
          state.textContent = `The build is over: ${d.status}${d.reason ? ' (' + d.reason + ')' : ''}${d.failed_line ? ', line ' + d.failed_line : ''}.`;
          break;
      }
    });
    if (!ended) state.textContent = 'The log stream ended early.';
    const now = await getJSON(templatePath(t.name), null, signal);
    factsBox.replaceChildren(h('h2', { id: 'tfacts-h' }, 'Template'), facts(templateFacts(now)));
    start.disabled = now.status !== 'ready';
    announce(`Template ${now.name}, ${now.status}`);
  } catch (err) {
    if (err.name === 'AbortError' || signal.aborted) return;
    state.replaceChildren('The build log is not available: ', errorBox(err));
  }
}
