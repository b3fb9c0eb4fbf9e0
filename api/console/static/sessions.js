// Airlock console: sessions. The list with a form to create one; a
// session's page with its state and limits, its actions (pause, resume,
// snapshot, fork, end), cells that run code in it, its files (upload,
// download, delete) and the live output of everything that runs in it.
'use strict';

const LIVE = ['creating', 'ready', 'busy'];
const FINAL = ['destroyed', 'failed', 'lost'];

// ---------- the list ----------

async function renderSessions(signal, params) {
  const all = params.get('all') === '1', before = params.get('before') || '';
  show(h('h1', {}, 'Sessions'), h('p', { class: 'muted' }, 'Loading…'));
  const page = await getJSON('v1/sessions', { state: all ? 'all' : 'live', limit: 50, before }, signal);
  const rows = page.sessions.map(s => h('tr', {},
    h('td', {}, h('a', { href: '#/sessions/' + encodeURIComponent(s.session_id) }, s.session_id)),
    h('td', {}, badge(s.state)),
    h('td', {}, s.image), h('td', { class: 'hide-narrow' }, s.size),
    h('td', { class: 'hide-narrow' }, s.backend || ''),
    h('td', {}, String((s.running || []).length)),
    h('td', { class: 'hide-narrow' }, `${s.usage.execs} execs, ${s.usage.cell_runs} cells`),
    h('td', { class: 'hide-narrow wrap' }, s.end_reason ? `${when(s.ended_at)}: ${s.end_reason}`
      : s.state === 'paused' ? 'paused ' + when(s.paused_at) : when(s.expires_at))));
  show(
    h('h1', {}, 'Sessions'),
    newSessionForm(),
    h('h2', {}, all ? 'All sessions' : 'Live and paused sessions'),
    h('p', {}, all ? h('a', { href: '#/sessions' }, 'Show live and paused sessions only') : h('a', { href: '#/sessions?all=1' }, 'Show ended sessions too')),
    page.sessions.length ? table([['Session'], ['State'], ['Image'], ['Size', 'hide-narrow'], ['Backend', 'hide-narrow'], ['Running'],
      ['Usage', 'hide-narrow'], ['Expires, paused or ended', 'hide-narrow']], rows, 'Sessions, newest first')
      : h('p', { class: 'muted', id: 'no-sessions' }, all ? 'No sessions.' : 'No live or paused sessions.'),
    pager('#/sessions', page.next_cursor, 'Older sessions', all ? { all: '1' } : null));
  announce(`${page.sessions.length} sessions`);
}

// newSessionForm creates a session with the options of POST /v1/sessions
// and opens it.
function newSessionForm() {
  const err = h('div', { id: 'new-session-error' });
  const field = (id, label, input, hint) => h('label', { for: id }, label, input, hint ? h('small', { class: 'muted' }, hint) : null);
  const opts = (list) => list.map(([v, t]) => h('option', { value: v }, t));
  const form = h('form', {
    class: 'card toolbar', id: 'new-session', 'aria-labelledby': 'new-session-h', onsubmit: ev => {
      ev.preventDefault();
      const el = form.elements;
      const req = {};
      if (el.image.value.trim()) req.image = el.image.value.trim();
      if (el.size.value) req.size = el.size.value;
      if (el.isolation.value) req.isolation = el.isolation.value;
      if (el.timeout.value) req.timeout_s = Number(el.timeout.value);
      const allow = el.allow.value.split(/[\s,]+/).filter(Boolean);
      if (allow.length) req.network = { mode: 'allow_list', allow };
      action(form.querySelector('button[type=submit]'), err, async () => {
        const s = await send('POST', 'v1/sessions', req);
        announce(`Session ${s.session_id} created`);
        location.hash = '#/sessions/' + encodeURIComponent(s.session_id);
      });
    },
  },
  h('h2', { id: 'new-session-h', class: 'full' }, 'New session'),
  field('image', 'Image', h('input', { id: 'image', name: 'image', list: 'images', placeholder: 'the server\'s default', spellcheck: 'false', autocomplete: 'off' })),
  h('datalist', { id: 'images' }, opts([['python-ds', ''], ['base', '']])),
  field('size', 'Size', h('select', { id: 'size', name: 'size' }, opts([['', 'default'], ['small', 'small'], ['medium', 'medium'], ['large', 'large']]))),
  field('isolation', 'Isolation', h('select', { id: 'isolation', name: 'isolation' }, opts([['', 'default'], ['container', 'container'], ['kernel', 'kernel'], ['vm', 'vm']]))),
  field('timeout', 'Timeout (s)', h('input', { id: 'timeout', name: 'timeout', type: 'number', min: 1, step: 1, placeholder: 'default' })),
  field('allow', 'Network allow list', h('input', { id: 'allow', name: 'allow', placeholder: 'none; e.g. pypi.org, *.github.com', spellcheck: 'false', autocomplete: 'off' })),
  h('button', { type: 'submit', 'data-busy': 'Creating…' }, 'Create session'),
  err);
  return form;
}

// ---------- one session ----------

function limitsList(s) {
  const l = s.limits || {}, u = s.usage || {};
  const list = [
    ['State', badge(s.state)], ['Image', s.image], ['Size', s.size], ['Backend', s.backend || ''],
    ['CPUs', String(l.cpus)], ['Memory', bytes(first(l, 'memory_bytes'))], ['Disk', bytes(first(l, 'disk_bytes'))],
    ['Timeout', first(l, 'timeout_s', 'timeout_sec') + ' s (idle ' + first(l, 'idle_timeout_s', 'idle_timeout_sec') + ' s)'], ['Created', when(s.created_at)],
    ['Expires', when(s.expires_at)], ['Network', s.network.mode + (s.network.allow && s.network.allow.length ? ': ' + s.network.allow.join(', ') : '')],
    ['Usage', `${u.execs} execs, ${u.cell_runs} cells, CPU ${ms(u.cpu_ms)}, memory ${memory(u, 'memory')} (peak ${memory(u, 'peak_memory')})`],
    ['Bytes moved', `${bytes(u.uploaded_bytes)} up, ${bytes(u.downloaded_bytes)} down`],
  ];
  if (s.paused_at) list.push(['Paused', when(s.paused_at)]);
  if (s.end_reason || s.ended_at) {
    list.push(['Ended', when(s.ended_at)], ['End reason', h('span', { id: 'end-reason' }, s.end_reason || s.state)]);
    if (s.end_detail) list.push(['End detail', s.end_detail]);
  }
  return list;
}

// stateNote says what the session's state means for its sandbox and files.
function stateNote(s) {
  if (LIVE.includes(s.state)) return null;
  if (s.state === 'paused') {
    return h('p', { class: 'note paused', id: 'state-note' },
      `Paused since ${when(s.paused_at)}: the sandbox is saved to disk and holds no CPU or memory; its files and processes are kept. Resume it to run code or reach its files.`);
  }
  if (s.state === 'destroying') return h('p', { class: 'note', id: 'state-note' }, 'The session is ending.');
  return h('p', { class: 'note ended', id: 'state-note' },
    `Ended ${when(s.ended_at)} (${s.end_reason || s.state}${s.end_detail ? ': ' + s.end_detail : ''}); its sandbox and files are gone.`);
}

async function renderSession(signal, id) {
  show(h('h1', {}, 'Session'), h('p', { class: 'muted' }, 'Loading…'));
  const s = await getJSON('v1/sessions/' + encodeURIComponent(id), null, signal);
  const live = LIVE.includes(s.state);
  const out = h('pre', { id: 'live-output', tabindex: 0, 'aria-label': 'Live output', 'aria-live': 'off' });
  const liveState = h('p', { class: 'muted', id: 'live-state' });
  const files = h('div', { id: 'files' });
  const metrics = h('div', { id: 'metrics' });
  const running = (s.running || []).map(r => h('li', {}, `pid ${r.pid}, `, h('a', { href: '#/executions/' + encodeURIComponent(r.execution_id) }, r.execution_id), `, since ${when(r.started_at)}`));
  show(
    h('p', { class: 'crumbs' }, h('a', { href: '#/sessions' }, '← Sessions')),
    h('h1', {}, `Session ${s.session_id} `, h('span', { id: 'session-state' }, badge(s.state))),
    sessionActions(s, signal),
    stateNote(s),
    h('div', { class: 'grid2' },
      h('section', { class: 'card', 'aria-labelledby': 'sfacts-h' }, h('h2', { id: 'sfacts-h' }, 'State and limits'), facts(limitsList(s))),
      h('section', { class: 'card', 'aria-labelledby': 'running-h' }, h('h2', { id: 'running-h' }, 'Running now'),
        running.length ? h('ul', {}, running) : h('p', { class: 'muted' }, 'Nothing is running.'))),
    h('section', { 'aria-labelledby': 'metrics-h' }, h('h2', { id: 'metrics-h' }, 'Resources'), metrics),
    live ? runSection(s, signal) : null,
    live && s.state !== 'paused' ? terminalSection(s, signal) : null,
    h('section', { 'aria-labelledby': 'files-h' }, h('h2', { id: 'files-h' }, 'Files'), live ? uploadForm(s.session_id, files, signal) : null, files),
    h('section', { 'aria-labelledby': 'live-h' }, h('h2', { id: 'live-h' }, 'Live output'), liveState, live ? out : null),
    h('section', { 'aria-labelledby': 'segress-h' }, h('h2', { id: 'segress-h' }, 'Egress'),
      h('p', {}, h('a', { href: '#/egress?session=' + encodeURIComponent(s.session_id) }, 'The egress log of this session, with filters'))),
    h('section', { 'aria-labelledby': 'sevents-h' }, h('h2', { id: 'sevents-h' }, 'Events'),
      h('p', {}, h('a', { id: 'session-events-link', href: '#/events?session=' + encodeURIComponent(s.session_id) }, 'The events of this session (created, paused, resumed, ended)'))));
  renderMetrics(s.session_id, metrics, live, signal);
  if (live) {
    follow(s.session_id, out, liveState, signal);
    showFiles(s.session_id, '/workspace', files, signal);
  } else if (s.state === 'paused') {
    liveState.textContent = 'The session is paused: nothing runs until it is resumed.';
    files.append(h('p', { class: 'muted' }, 'The files are kept while the session is paused; resume it to list them.'));
  } else {
    liveState.textContent = 'The session has ended.';
    files.append(h('p', { class: 'muted' }, 'The session has ended; its files are gone.'));
  }
  announce(`Session ${s.session_id}, ${s.state}`);
}

// sessionActions are the buttons of what the session's state allows:
// pause, snapshot and fork while live; resume while paused; end unless it
// has ended. Each asks the API and shows its problem on failure.
function sessionActions(s, signal) {
  const id = s.session_id, path = 'v1/sessions/' + encodeURIComponent(id);
  const err = h('div', { id: 'session-error' });
  const result = h('div', { id: 'session-result', role: 'status' });
  const bar = h('div', { class: 'actions', id: 'session-actions' });
  const again = () => { if (!signal.aborted) render(); };
  const btn = (label, busy, attrs, fn) => {
    const b = h('button', { type: 'button', 'data-busy': busy, ...attrs, onclick: () => action(b, err, fn) }, label);
    return b;
  };
  if (LIVE.includes(s.state)) {
    bar.append(btn('Pause', 'Pausing…', { id: 'pause' }, async () => {
      await send('POST', path + '/pause');
      announce('Paused');
      again();
    }));
    const name = h('input', { id: 'snapshot-name', name: 'snapshot-name', placeholder: 'snapshot name (optional)', 'aria-label': 'Snapshot name', autocomplete: 'off' });
    bar.append(h('span', { class: 'inline' }, name, btn('Snapshot', 'Saving…', { id: 'snapshot' }, async () => {
      const snap = await send('POST', path + '/snapshots', name.value.trim() ? { name: name.value.trim() } : {});
      result.replaceChildren(h('p', {}, 'Snapshot ', h('a', { href: '#/snapshots' }, snap.snapshot_id), ` saved (${bytes(first(snap, 'size_bytes', 'bytes'))}).`));
      name.value = '';
    })));
    bar.append(btn('Fork', 'Forking…', { id: 'fork' }, async () => {
      const res = await send('POST', path + '/fork', { count: 1 });
      result.replaceChildren(h('p', {}, 'Forked: ', (res.sessions || []).map(f => h('a', { href: '#/sessions/' + encodeURIComponent(f.session_id), class: 'fork' }, f.session_id))));
    }));
  }
  if (s.state === 'paused') {
    bar.append(btn('Resume', 'Resuming…', { id: 'resume' }, async () => {
      await send('POST', path + '/resume');
      announce('Resumed');
      again();
    }));
  }
  if (!FINAL.includes(s.state) && s.state !== 'destroying') {
    bar.append(confirming('End session', 'End it? Its sandbox and files are destroyed.', { id: 'end' }, async yes => {
      await action(yes, err, async () => {
        await send('DELETE', path);
        announce('Ended');
        again();
      });
    }));
  }
  if (!bar.childNodes.length) return null;
  return h('div', { class: 'card' }, bar, err, result);
}

// ---------- running code ----------

// runSection is a cell: code in a language, run in the session; the
// results are listed newest first. Shell runs as an exec; Python and
// Node run in a code context of the session (made on first use), so
// their variables last from cell to cell.
function runSection(s, signal) {
  const id = s.session_id;
  const contexts = new Map(); // language -> context_id
  const err = h('div', { id: 'run-error' });
  const cells = h('div', { id: 'cells' });
  const code = h('textarea', { id: 'code', name: 'code', rows: 5, spellcheck: 'false', autocomplete: 'off', 'aria-label': 'Code' });
  const lang = h('select', { id: 'language', name: 'language', 'aria-label': 'Language' },
    h('option', { value: 'shell' }, 'shell'), h('option', { value: 'python' }, 'python'), h('option', { value: 'node' }, 'node'));
  const run = h('button', { type: 'submit', id: 'run', 'data-busy': 'Running…' }, 'Run');
  const form = h('form', {
    class: 'card run', onsubmit: ev => {
      ev.preventDefault();
      const text = code.value;
      if (!text.trim()) return;
      action(run, err, async () => {
        const language = lang.value;
        let res;
        if (language === 'shell') {
          res = await send('POST', `v1/sessions/${encodeURIComponent(id)}/exec`, { shell: text });
        } else {
          if (!contexts.has(language)) {
            const c = await send('POST', `v1/sessions/${encodeURIComponent(id)}/contexts`, { language });
            contexts.set(language, c.context_id);
          }
          res = await send('POST', `v1/sessions/${encodeURIComponent(id)}/contexts/${encodeURIComponent(contexts.get(language))}/run`, { code: text });
        }
        cells.prepend(cellView(language, text, res));
        showFiles(id, '/workspace', document.getElementById('files'), signal);
      });
    },
  },
  h('div', { class: 'toolbar' }, lang, run,
    h('span', { class: 'muted' }, 'Shell runs as a command; Python and Node keep their variables from cell to cell.')),
  code, err);
  // Ctrl+Enter runs the cell.
  code.addEventListener('keydown', ev => { if (ev.key === 'Enter' && (ev.ctrlKey || ev.metaKey)) { ev.preventDefault(); form.requestSubmit(); } });
  return h('section', { 'aria-labelledby': 'run-h' }, h('h2', { id: 'run-h' }, 'Run code'), form, cells);
}

// cellView shows one result: the code, then stdout, stderr and the exit
// code (an exec) or the value and error (a cell), all as text.
function cellView(language, code, r) {
  const exit = r.exit_code !== undefined ? r.exit_code : (r.error ? 1 : 0);
  const summary = [language, r.exit_code !== undefined ? `exit ${r.exit_code}` : (r.error ? 'error' : 'ok'), ms(r.duration_ms)];
  if (r.timed_out) summary.push('timed out');
  const parts = [
    h('p', { class: 'cell-head' }, badge(exit === 0 ? 'completed' : 'failed'), ' ', h('span', { class: 'cell-summary' }, summary.join(', ')),
      r.execution_id ? [' ', h('a', { href: '#/executions/' + encodeURIComponent(r.execution_id) }, 'execution')] : null),
    h('pre', { class: 'cell-code', 'aria-label': 'code' }, code),
  ];
  if (r.exit_code !== undefined) parts.push(h('p', { class: 'cell-exit' }, 'Exit code ', h('strong', { class: 'exit-code' }, String(r.exit_code))));
  const stream = (name, text, cut) => [h('h3', {}, name + (cut ? ' (cut at the limit)' : '')),
    text ? h('pre', { class: name, tabindex: 0, 'aria-label': name }, text) : h('p', { class: name + ' muted empty' }, '(empty)')];
  parts.push(stream('stdout', r.stdout, r.stdout_truncated), stream('stderr', r.stderr, r.stderr_truncated));
  if (r.value) parts.push(h('h3', {}, 'value'), h('pre', { class: 'value' }, r.value));
  if (r.error) parts.push(h('h3', {}, 'error'), h('pre', { class: 'cell-error' }, `${r.error.name}: ${r.error.value}\n${r.error.traceback || ''}`));
  for (const o of r.outputs || []) {
    if (o.type === 'image/png') parts.push(h('img', { class: 'cell-image', alt: 'An image the cell made', src: 'data:image/png;base64,' + o.data }));
    else parts.push(h('pre', { class: 'output' }, o.data)); // text/html too: shown as text
  }
  if (r.ended_by) parts.push(h('p', { class: 'muted' }, 'Ended by ' + r.ended_by + (r.limits_hit && r.limits_hit.length ? ' (' + r.limits_hit.join(', ') + ')' : '')));
  return h('article', { class: 'card cell' }, parts);
}

// ---------- files ----------

// uploadForm puts a file from this computer into the session (at a path
// relative to /workspace, or absolute under /workspace or /tmp).
function uploadForm(id, box, signal) {
  const err = h('div', { id: 'upload-error' });
  const file = h('input', { id: 'upload-file', name: 'file', type: 'file', required: true });
  const path = h('input', { id: 'upload-path', name: 'path', placeholder: 'path in the session (default: the file\'s name)', spellcheck: 'false', autocomplete: 'off' });
  const go = h('button', { type: 'submit', id: 'upload', 'data-busy': 'Uploading…' }, 'Upload');
  const form = h('form', {
    class: 'toolbar', onsubmit: ev => {
      ev.preventDefault();
      const f = file.files[0];
      if (!f) return;
      const to = path.value.trim() || f.name;
      action(go, err, async () => {
        const res = await (await call(`v1/sessions/${encodeURIComponent(id)}/files`, { path: to },
          { method: 'PUT', body: f, headers: { 'Content-Type': 'application/octet-stream' }, signal })).json();
        announce(`Uploaded ${res.path}`);
        file.value = '';
        path.value = '';
        await showFiles(id, '/workspace', box, signal);
      });
    },
  },
  h('label', { for: 'upload-file' }, 'File', file),
  h('label', { for: 'upload-path' }, 'To', path),
  go, err);
  return form;
}

async function showFiles(id, path, box, signal) {
  if (!box) return;
  const again = () => showFiles(id, path, box, signal);
  try {
    const list = await getJSON(`v1/sessions/${encodeURIComponent(id)}/files`, { path, list: 1 }, signal);
    const err = h('div', { id: 'files-error' });
    const rows = [];
    if (path !== '/workspace' && path !== '/tmp') {
      const up = path.replace(/\/[^/]+$/, '') || '/workspace';
      rows.push(h('tr', {}, h('td', {}, h('button', { type: 'button', class: 'link', onclick: () => showFiles(id, up, box, signal) }, '..')), h('td', {}, 'dir'), h('td', {}), h('td', { class: 'hide-narrow' }), h('td', {})));
    }
    for (const f of list.entries) {
      const full = list.path.replace(/\/$/, '') + '/' + f.name;
      const name = f.type === 'dir'
        ? h('button', { type: 'button', class: 'link', onclick: () => showFiles(id, full, box, signal) }, f.name + '/')
        : f.type === 'file'
          ? h('button', { type: 'button', class: 'link', 'aria-label': 'Download ' + f.name, 'data-file': f.name, onclick: ev => action(ev.currentTarget, err, async () => download(await blobOf(`v1/sessions/${encodeURIComponent(id)}/files`, { path: full }, signal), f.name)) }, f.name)
          : f.name;
      const del = confirming('Delete', `Delete ${f.name}?`, { 'aria-label': 'Delete ' + f.name, class: 'danger small' }, async yes => {
        await action(yes, err, async () => {
          await send('DELETE', `v1/sessions/${encodeURIComponent(id)}/files`, undefined, { path: full });
          announce(`Deleted ${f.name}`);
          await again();
        });
      });
      rows.push(h('tr', {}, h('td', { class: 'wrap' }, name), h('td', {}, f.type), h('td', {}, bytes(first(f, 'size_bytes', 'size'))),
        h('td', { class: 'hide-narrow' }, when(first(f, 'modified_at', 'mtime'))), h('td', {}, f.type === 'file' || f.type === 'dir' ? del : null)));
    }
    box.replaceChildren(h('p', { class: 'muted' }, list.path + (list.truncated ? ' (the list was cut)' : '')),
      rows.length ? table([['Name'], ['Type'], ['Size'], ['Modified', 'hide-narrow'], ['']], rows, 'Files in ' + list.path) : h('p', { class: 'muted' }, 'Empty.'),
      err);
  } catch (err) {
    if (err.name !== 'AbortError') box.replaceChildren(errorBox(err));
  }
}

// ---------- live output ----------

// follow reads the session's live output (server-sent events) into out.
async function follow(id, out, state, signal) {
  const decoders = new Map(); // run/stream -> TextDecoder (a character may span two chunks)
  const MAX_NODES = 4000;
  const append = (text, cls) => {
    if (!text) return;
    out.append(cls ? h('span', { class: cls }, text) : document.createTextNode(text));
    while (out.childNodes.length > MAX_NODES) out.firstChild.remove();
    out.scrollTop = out.scrollHeight;
  };
  const chunk = (d, stream) => {
    const k = d.run + '/' + stream;
    if (!decoders.has(k)) decoders.set(k, new TextDecoder());
    return decoders.get(k).decode(chunkBytes(d), { stream: true });
  };
  const handle = (name, d) => {
    switch (name) {
      case 'watching': state.textContent = 'Watching: output appears here as the session\'s commands and cells print it.'; break;
      case 'start': append(`▶ ${d.kind} ${d.run}${d.pid ? ' (pid ' + d.pid + ')' : ''}: ${d.command || ''}${d.replay ? ' [already running]' : ''}\n`, 'meta'); break;
      case 'stdout': append(chunk(d, 'stdout')); break;
      case 'stderr': append(chunk(d, 'stderr'), 'err'); break;
      case 'end': append(`■ ${d.kind || 'run'} ${d.run} ended: exit ${d.exit_code ?? '?'}${d.timed_out ? ' (timed out)' : ''}${d.error ? ' (' + d.error + ')' : ''}, ${ms(d.duration_ms)}\n`, 'meta'); break;
      case 'closed': state.textContent = d.state === 'paused' ? 'The session was paused.' : `The session has ended (${d.end_reason || d.state || 'gone'}).`; break;
      case 'error': state.textContent = 'The watch stopped: ' + ((d && d.detail) || 'error'); break;
    }
  };
  try {
    const resp = await call(`v1/sessions/${encodeURIComponent(id)}/output`, null, { signal, headers: { Accept: 'text/event-stream' } });
    await readEvents(resp, handle);
  } catch (err) {
    if (err.name === 'AbortError') return;
    state.textContent = 'Live output is not available: ' + err.message;
  }
}
