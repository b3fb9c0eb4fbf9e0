// Airlock console: a page over the REST API, signed in with an API key
// that stays in this tab's session storage. Everything the API returns is
// shown as text (never as HTML): program output, file names and host
// names are chosen by the code that ran.
'use strict';

const KEY = 'airlock.console.key';
const apiRoot = new URL('../', location.href); // /console/ -> /
const PHASES = ['acquire', 'hand_in', 'run', 'collect', 'destroy'];
const main = document.getElementById('main');
const status = document.getElementById('status');
let view = null; // { abort: AbortController } of the page shown

// ---------- small helpers ----------

function h(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'class') e.className = v;
    else if (k === 'style') Object.assign(e.style, v); // CSSOM: allowed by the page's CSP
    else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of children.flat(Infinity)) {
    if (c === undefined || c === null || c === false) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

// show puts nodes in the main area (null and false are left out).
function show(...nodes) {
  main.replaceChildren(...nodes.flat(Infinity).filter(n => n !== null && n !== undefined && n !== false));
}

function key() { return sessionStorage.getItem(KEY) || ''; }

function announce(text) { status.textContent = text; }

class Problem extends Error {
  constructor(status, p) {
    super((p && (p.detail || p.title)) || `HTTP ${status}`);
    this.status = status;
    this.type = (p && p.type) || '';
  }
}

function apiURL(path, params) {
  const u = new URL(path, apiRoot);
  for (const [k, v] of Object.entries(params || {})) {
    if (v !== undefined && v !== null && v !== '') u.searchParams.set(k, v);
  }
  return u;
}

async function call(path, params, opts) {
  const resp = await fetch(apiURL(path, params), {
    ...opts,
    headers: { Authorization: 'Bearer ' + key(), Accept: 'application/json', ...((opts && opts.headers) || {}) },
    cache: 'no-store',
  });
  if (!resp.ok) {
    let p = null;
    try { p = await resp.json(); } catch (_) { /* not a problem document */ }
    if (resp.status === 401) signOut('The key was refused: sign in again.');
    throw new Problem(resp.status, p);
  }
  return resp;
}

async function getJSON(path, params, signal) {
  return (await call(path, params, { signal })).json();
}

function when(t) {
  if (!t) return '';
  const d = new Date(t);
  return isNaN(d) ? String(t) : d.toLocaleString();
}

function ms(n) {
  if (n === undefined || n === null) return '';
  return n >= 10000 ? (n / 1000).toFixed(1) + ' s' : Math.round(n) + ' ms';
}

function bytes(n) {
  if (!n) return '0 B';
  const u = ['B', 'KiB', 'MiB', 'GiB'];
  let i = 0;
  while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; }
  return (i ? n.toFixed(1) : n) + ' ' + u[i];
}

function badge(text) { return h('span', { class: 'badge ' + text }, text); }

function errorBox(err) {
  return h('p', { class: 'error', role: 'alert' }, err instanceof Error ? err.message : String(err));
}

function table(headers, rows, caption) {
  return h('div', { class: 'table-wrap' },
    h('table', {},
      caption ? h('caption', { class: 'visually-hidden' }, caption) : null,
      h('thead', {}, h('tr', {}, headers.map(([t, cls]) => h('th', { scope: 'col', class: cls }, t)))),
      h('tbody', {}, rows)));
}

// phaseBar draws the milliseconds of each phase as one bar.
function phaseBar(phases) {
  const p = phases || {};
  const total = PHASES.reduce((s, k) => s + (p[k] || 0), 0);
  const label = PHASES.filter(k => p[k] !== undefined).map(k => `${k} ${ms(p[k])}`).join(', ') || 'no phases recorded';
  const bar = h('div', { class: 'bar', role: 'img', 'aria-label': 'Phases: ' + label, title: label });
  if (total > 0) {
    for (const k of PHASES) {
      if (!p[k]) continue;
      bar.append(h('span', { style: { width: (100 * p[k] / total).toFixed(2) + '%', background: `var(--${k})` } }));
    }
  }
  return bar;
}

function phaseLegend(phases) {
  const p = phases || {};
  return h('div', { class: 'legend' }, PHASES.filter(k => p[k] !== undefined).map(k =>
    h('span', {}, h('i', { style: { background: `var(--${k})` }, 'aria-hidden': 'true' }), `${k}: ${ms(p[k])}`)));
}

// blobOf fetches bytes of the API with the key (images, downloads).
async function blobOf(path, params, signal) {
  return (await call(path, params, { signal, headers: { Accept: '*/*' } })).blob();
}

function download(blob, name) {
  const a = h('a', { href: URL.createObjectURL(blob), download: name.split('/').pop() || 'download' });
  document.body.append(a);
  a.click();
  setTimeout(() => { URL.revokeObjectURL(a.href); a.remove(); }, 1000);
}

const inlineImage = t => ['image/png', 'image/jpeg', 'image/gif', 'image/webp'].includes(t);

// ---------- sign in ----------

function signOut(message) {
  sessionStorage.removeItem(KEY);
  if (location.hash !== '#/signin') location.hash = '#/signin';
  render(message);
}

function renderSignIn(message) {
  const input = h('input', { id: 'key', type: 'password', autocomplete: 'off', required: true, spellcheck: 'false' });
  const err = h('p', { class: 'error', role: 'alert' }, message || '');
  const form = h('form', {
    class: 'card signin', onsubmit: async ev => {
      ev.preventDefault();
      const k = input.value.trim();
      if (!k) return;
      sessionStorage.setItem(KEY, k);
      try {
        await getJSON('v1/executions', { limit: 1 });
        location.hash = '#/executions';
      } catch (e) {
        sessionStorage.removeItem(KEY);
        err.textContent = e.status === 401 ? 'That key was refused.' : e.message;
        input.focus();
      }
    },
  },
  h('h1', {}, 'Sign in'),
  h('p', { class: 'muted' }, 'Your tenant\'s API key. It stays in this browser tab (session storage) and is sent only to this server.'),
  h('label', { for: 'key' }, 'API key'), input,
  h('button', { type: 'submit' }, 'Sign in'), err);
  show(form);
  input.focus();
}

// ---------- executions ----------

async function renderExecutions(signal, before) {
  show(h('h1', {}, 'Executions'), h('p', { class: 'muted' }, 'Loading…'));
  const page = await getJSON('v1/executions', { limit: 50, before }, signal);
  const rows = page.executions.map(e => h('tr', {},
    h('td', {}, h('a', { href: '#/executions/' + encodeURIComponent(e.execution_id) }, when(e.created_at))),
    h('td', {}, badge(e.status)),
    h('td', {}, e.language),
    h('td', {}, e.session_id ? 'session' : 'one-shot'),
    h('td', {}, String(e.exit_code)),
    h('td', {}, ms(e.duration_ms)),
    h('td', { class: 'hide-narrow' }, e.start_source || ''),
    h('td', { class: 'hide-narrow' }, phaseBar(e.phases_ms)),
    h('td', {}, String((e.artifacts || []).length))));
  show(
    h('h1', {}, 'Executions'),
    page.executions.length ? table([['Started'], ['Status'], ['Language'], ['Kind'], ['Exit'], ['Duration'],
      ['Start', 'hide-narrow'], ['Phases', 'hide-narrow'], ['Files']], rows, 'Recent executions, newest first')
      : h('p', { class: 'muted' }, 'No executions yet.'),
    page.next_cursor ? h('p', {}, h('a', { href: '#/executions?before=' + encodeURIComponent(page.next_cursor) }, 'Older executions')) : null);
  announce(`${page.executions.length} executions`);
}

async function renderExecution(signal, id) {
  show(h('h1', {}, 'Execution'), h('p', { class: 'muted' }, 'Loading…'));
  const e = await getJSON('v1/executions/' + encodeURIComponent(id), null, signal);
  const facts = [
    ['ID', e.execution_id], ['Status', badge(e.status)], ['Exit code', String(e.exit_code)],
    ['Language', e.language], ['Image', e.image], ['Backend', e.backend || ''],
    ['Start source', e.start_source || ''], ['Duration', ms(e.duration_ms)],
    ['Peak memory', (e.peak_memory_mib || 0) + ' MiB'], ['Started', when(e.created_at)],
    ['Finished', when(e.finished_at)], ['Session', e.session_id ? h('a', { href: '#/sessions/' + encodeURIComponent(e.session_id) }, e.session_id) : 'none (one-shot)'],
    ['Agent', e.agent_id || ''], ['Timed out', e.timed_out ? 'yes' : 'no'], ['Out of memory', e.oom_killed ? 'yes' : 'no'],
    ['Network attempt', e.had_network_attempt ? 'yes' : 'no'],
  ];
  if (e.error) facts.push(['Error', e.error]);
  const arts = h('div', { class: 'artifacts' });
  const egress = h('div', { id: 'execution-egress' });
  show(
    h('p', { class: 'crumbs' }, h('a', { href: '#/executions' }, '← Executions')),
    h('h1', {}, `Execution ${e.execution_id}`),
    h('div', { class: 'grid2' },
      h('section', { class: 'card', 'aria-labelledby': 'facts-h' }, h('h2', { id: 'facts-h' }, 'Summary'),
        h('dl', { class: 'facts' }, facts.map(([k, v]) => [h('dt', {}, k), h('dd', {}, v)]))),
      h('section', { class: 'card', 'aria-labelledby': 'phases-h' }, h('h2', { id: 'phases-h' }, 'Phases'),
        phaseBar(e.phases_ms), phaseLegend(e.phases_ms))),
    h('h2', {}, 'stdout' + (e.stdout_truncated ? ' (cut at the limit)' : '')), e.stdout ? h('pre', { tabindex: 0, 'aria-label': 'stdout' }, e.stdout) : h('p', { class: 'muted' }, '(empty)'),
    h('h2', {}, 'stderr' + (e.stderr_truncated ? ' (cut at the limit)' : '')), e.stderr ? h('pre', { tabindex: 0, 'aria-label': 'stderr' }, e.stderr) : h('p', { class: 'muted' }, '(empty)'),
    h('h2', {}, `Artifacts (${(e.artifacts || []).length})`), arts,
    h('section', { 'aria-labelledby': 'eegress-h' }, h('h2', { id: 'eegress-h' }, 'Egress'), egress));
  for (const a of e.artifacts || []) {
    const card = h('figure', { class: 'card artifact' });
    const get = () => blobOf('v1/artifacts/' + encodeURIComponent(a.artifact_id), null, signal);
    card.append(h('figcaption', {}, h('strong', {}, a.filename), ' ', h('span', { class: 'muted' }, `${a.content_type}, ${bytes(a.size_bytes)}`), ' ',
      h('button', { type: 'button', class: 'link', onclick: async () => download(await get(), a.filename) }, 'Download')));
    if (inlineImage(a.content_type)) {
      get().then(b => {
        const img = h('img', { alt: `${a.filename} (an image the program wrote)`, src: URL.createObjectURL(b) });
        card.insertBefore(img, card.firstChild);
      }, err => { if (err.name !== 'AbortError') card.append(errorBox(err)); });
    }
    arts.append(card);
  }
  showExecutionEgress(e, egress, signal);
  announce(`Execution ${e.execution_id}`);
}

// showExecutionEgress puts the latest egress events of a one-shot run in
// box; a run in a session points to the session's log, which has them.
async function showExecutionEgress(e, box, signal) {
  if (e.session_id) {
    box.append(h('p', {}, h('a', { href: '#/egress?session=' + encodeURIComponent(e.session_id) }, 'The egress log of its session')));
    return;
  }
  try {
    const page = await getJSON(egressPath({ kind: 'execution', id: e.execution_id }), { limit: 20 }, signal);
    box.replaceChildren(
      page.events.length ? egressTable(page.events, 'The run\'s latest egress events, newest first')
        : h('p', { class: 'muted' }, e.had_network_attempt ? 'No egress events.' : 'No egress events: the run reached for no network.'),
      h('p', {}, h('a', { href: '#/egress?execution=' + encodeURIComponent(e.execution_id) }, 'The egress log of this run, with filters')));
  } catch (err) {
    if (err.name !== 'AbortError') box.replaceChildren(errorBox(err));
  }
}

// ---------- sessions ----------

async function renderSessions(signal, all) {
  show(h('h1', {}, 'Sessions'), h('p', { class: 'muted' }, 'Loading…'));
  const page = await getJSON('v1/sessions', { state: all ? 'all' : 'live', limit: 100 }, signal);
  const rows = page.sessions.map(s => h('tr', {},
    h('td', {}, h('a', { href: '#/sessions/' + encodeURIComponent(s.session_id) }, s.session_id)),
    h('td', {}, badge(s.state)),
    h('td', {}, s.image), h('td', { class: 'hide-narrow' }, s.size),
    h('td', { class: 'hide-narrow' }, s.backend || ''),
    h('td', {}, String((s.running || []).length)),
    h('td', { class: 'hide-narrow' }, `${s.usage.execs} execs, ${s.usage.cell_runs} cells`),
    h('td', { class: 'hide-narrow' }, when(s.ended_at || s.expires_at))));
  show(
    h('h1', {}, 'Sessions'),
    h('p', {}, all ? h('a', { href: '#/sessions' }, 'Show live sessions only') : h('a', { href: '#/sessions?all=1' }, 'Show ended sessions too')),
    page.sessions.length ? table([['Session'], ['State'], ['Image'], ['Size', 'hide-narrow'], ['Backend', 'hide-narrow'], ['Running'],
      ['Usage', 'hide-narrow'], [all ? 'Ends / ended' : 'Expires', 'hide-narrow']], rows, 'Sessions, newest first')
      : h('p', { class: 'muted' }, all ? 'No sessions.' : 'No live sessions.'));
  announce(`${page.sessions.length} sessions`);
}

function limitsList(s) {
  const l = s.limits, u = s.usage;
  return [
    ['State', badge(s.state)], ['Image', s.image], ['Size', s.size], ['Backend', s.backend || ''],
    ['CPUs', String(l.cpus)], ['Memory', bytes(l.memory_bytes)], ['Disk', bytes(l.disk_bytes)],
    ['Timeout', l.timeout_s + ' s (idle ' + l.idle_timeout_s + ' s)'], ['Created', when(s.created_at)],
    ['Expires', when(s.expires_at)], ['Network', s.network.mode + (s.network.allow && s.network.allow.length ? ': ' + s.network.allow.join(', ') : '')],
    ['Usage', `${u.execs} execs, ${u.cell_runs} cells, CPU ${ms(u.cpu_ms)}, memory ${u.memory_mib} MiB (peak ${u.peak_memory_mib} MiB)`],
    ['Bytes moved', `${bytes(u.uploaded_bytes)} up, ${bytes(u.downloaded_bytes)} down`],
  ].concat(s.end_reason ? [['Ended', `${when(s.ended_at)} (${s.end_reason})`]] : []);
}

async function renderSession(signal, id) {
  show(h('h1', {}, 'Session'), h('p', { class: 'muted' }, 'Loading…'));
  const s = await getJSON('v1/sessions/' + encodeURIComponent(id), null, signal);
  const out = h('pre', { id: 'live-output', tabindex: 0, 'aria-label': 'Live output', 'aria-live': 'off' });
  const liveState = h('p', { class: 'muted', id: 'live-state' });
  const files = h('div', { id: 'files' });
  const egress = h('div', { id: 'session-egress' });
  const running = (s.running || []).map(r => h('li', {}, `pid ${r.pid}, `, h('a', { href: '#/executions/' + encodeURIComponent(r.execution_id) }, r.execution_id), `, since ${when(r.started_at)}`));
  show(
    h('p', { class: 'crumbs' }, h('a', { href: '#/sessions' }, '← Sessions')),
    h('h1', {}, `Session ${s.session_id}`),
    h('div', { class: 'grid2' },
      h('section', { class: 'card', 'aria-labelledby': 'sfacts-h' }, h('h2', { id: 'sfacts-h' }, 'State and limits'),
        h('dl', { class: 'facts' }, limitsList(s).map(([k, v]) => [h('dt', {}, k), h('dd', {}, v)]))),
      h('section', { class: 'card', 'aria-labelledby': 'running-h' }, h('h2', { id: 'running-h' }, 'Running now'),
        running.length ? h('ul', {}, running) : h('p', { class: 'muted' }, 'Nothing is running.'))),
    h('section', { 'aria-labelledby': 'live-h' }, h('h2', { id: 'live-h' }, 'Live output'), liveState, out),
    h('section', { 'aria-labelledby': 'files-h' }, h('h2', { id: 'files-h' }, 'Files'), files),
    h('section', { 'aria-labelledby': 'segress-h' }, h('h2', { id: 'segress-h' }, 'Egress'),
      h('p', {}, h('a', { href: '#/egress?session=' + encodeURIComponent(s.session_id) }, 'The egress log of this session, with filters'))));
  if (s.state === 'creating' || s.state === 'ready' || s.state === 'busy') {
    follow(s.session_id, out, liveState, signal);
    showFiles(s.session_id, '/workspace', files, signal);
  } else {
    liveState.textContent = 'The session has ended.';
    files.append(h('p', { class: 'muted' }, 'The session has ended; its files are gone.'));
  }
  announce(`Session ${s.session_id}, ${s.state}`);
}

async function showFiles(id, path, box, signal) {
  try {
    const list = await getJSON(`v1/sessions/${encodeURIComponent(id)}/files`, { path, list: 1 }, signal);
    const rows = [];
    if (path !== '/workspace' && path !== '/tmp') {
      const up = path.replace(/\/[^/]+$/, '') || '/workspace';
      rows.push(h('tr', {}, h('td', {}, h('button', { type: 'button', class: 'link', onclick: () => showFiles(id, up, box, signal) }, '..')), h('td', {}, 'dir'), h('td', {}), h('td', { class: 'hide-narrow' })));
    }
    for (const f of list.entries) {
      const full = list.path.replace(/\/$/, '') + '/' + f.name;
      const name = f.type === 'dir'
        ? h('button', { type: 'button', class: 'link', onclick: () => showFiles(id, full, box, signal) }, f.name + '/')
        : f.type === 'file'
          ? h('button', { type: 'button', class: 'link', 'aria-label': 'Download ' + f.name, onclick: async () => download(await blobOf(`v1/sessions/${encodeURIComponent(id)}/files`, { path: full }, signal), f.name) }, f.name)
          : f.name;
      rows.push(h('tr', {}, h('td', { class: 'wrap' }, name), h('td', {}, f.type), h('td', {}, bytes(f.size_bytes)), h('td', { class: 'hide-narrow' }, when(f.modified_at))));
    }
    box.replaceChildren(h('p', { class: 'muted' }, list.path + (list.truncated ? ' (the list was cut)' : '')),
      rows.length ? table([['Name'], ['Type'], ['Size'], ['Modified', 'hide-narrow']], rows, 'Files in ' + list.path) : h('p', { class: 'muted' }, 'Empty.'));
  } catch (err) {
    if (err.name !== 'AbortError') box.replaceChildren(errorBox(err));
  }
}

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
    let b;
    if (d.data_b64) b = Uint8Array.from(atob(d.data_b64), c => c.charCodeAt(0));
    else b = new TextEncoder().encode(d.data || '');
    return decoders.get(k).decode(b, { stream: true });
  };
  const handle = (name, d) => {
    switch (name) {
      case 'watching': state.textContent = 'Watching: output appears here as the session\'s commands and cells print it.'; break;
      case 'start': append(`▶ ${d.kind} ${d.run}${d.pid ? ' (pid ' + d.pid + ')' : ''}: ${d.command || ''}${d.replay ? ' [already running]' : ''}\n`, 'meta'); break;
      case 'stdout': append(chunk(d, 'stdout')); break;
      case 'stderr': append(chunk(d, 'stderr'), 'err'); break;
      case 'end': append(`■ ${d.kind || 'run'} ${d.run} ended: exit ${d.exit_code ?? '?'}${d.timed_out ? ' (timed out)' : ''}${d.error ? ' (' + d.error + ')' : ''}, ${ms(d.duration_ms)}\n`, 'meta'); break;
      case 'closed': state.textContent = `The session has ended (${d.end_reason || d.state || 'gone'}).`; break;
      case 'error': state.textContent = 'The watch stopped: ' + ((d && d.detail) || 'error'); break;
    }
  };
  try {
    const resp = await call(`v1/sessions/${encodeURIComponent(id)}/output`, null, { signal, headers: { Accept: 'text/event-stream' } });
    const reader = resp.body.getReader();
    const dec = new TextDecoder();
    let buf = '';
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buf += dec.decode(value, { stream: true });
      let i;
      while ((i = buf.indexOf('\n\n')) >= 0) {
        const block = buf.slice(0, i);
        buf = buf.slice(i + 2);
        let name = 'message', data = '';
        for (const line of block.split('\n')) {
          if (line.startsWith('event: ')) name = line.slice(7);
          else if (line.startsWith('data: ')) data += line.slice(6);
        }
        if (!data) continue;
        try { handle(name, JSON.parse(data)); } catch (_) { /* a malformed event is skipped */ }
      }
    }
  } catch (err) {
    if (err.name === 'AbortError') return;
    state.textContent = 'Live output is not available: ' + err.message;
  }
}

// ---------- egress ----------

// egressTable renders egress events (newest first) as a table.
function egressTable(events, caption) {
  const rows = events.map(e => h('tr', {},
    h('td', {}, when(e.occurred_at)), h('td', {}, e.kind), h('td', {}, badge(e.verdict)),
    h('td', { class: 'wrap' }, [e.name, e.port ? ':' + e.port : ''].join('')),
    h('td', { class: 'hide-narrow' }, e.protocol || ''),
    h('td', { class: 'hide-narrow' }, `${bytes(e.up_bytes)} / ${bytes(e.down_bytes)}`),
    h('td', { class: 'wrap' }, [e.reason, (e.flags || []).join(' ')].filter(Boolean).join('; '))));
  return table([['Time'], ['Kind'], ['Verdict'], ['Destination'], ['Protocol', 'hide-narrow'], ['Up / down', 'hide-narrow'], ['Reason']], rows, caption);
}

// egressPath is the API path of the log of a session or an execution.
function egressPath(src) {
  return (src.kind === 'execution' ? 'v1/executions/' : 'v1/sessions/') + encodeURIComponent(src.id) + '/egress';
}

// renderEgress shows the egress log of one session or one one-shot run
// (?session= or ?execution=), filtered by kind and verdict.
async function renderEgress(signal, params) {
  show(h('h1', {}, 'Egress'), h('p', { class: 'muted' }, 'Loading…'));
  const [sp, ep] = await Promise.all([
    getJSON('v1/sessions', { state: 'all', limit: 100 }, signal),
    getJSON('v1/executions', { limit: 100 }, signal)]);
  const sessions = sp.sessions;
  // One-shot runs whose code reached for the network (the others have
  // empty logs); the one asked for is listed even when it is older.
  const runs = ep.executions.filter(e => !e.session_id && e.had_network_attempt);
  let src = null;
  if (params.get('execution')) src = { kind: 'execution', id: params.get('execution') };
  else if (params.get('session')) src = { kind: 'session', id: params.get('session') };
  else if (sessions[0]) src = { kind: 'session', id: sessions[0].session_id };
  else if (runs[0]) src = { kind: 'execution', id: runs[0].execution_id };
  const value = src ? src.kind + ':' + src.id : '';
  const sessionOpts = sessions.map(s => ['session:' + s.session_id, `${s.session_id} (${s.state})`]);
  const runOpts = runs.map(e => ['execution:' + e.execution_id, `${e.execution_id} (${e.language}, ${when(e.created_at)})`]);
  if (src && src.kind === 'session' && !sessions.some(s => s.session_id === src.id)) sessionOpts.unshift([value, src.id]);
  if (src && src.kind === 'execution' && !runs.some(e => e.execution_id === src.id)) runOpts.unshift([value, src.id]);
  const opt = v => ([ov, t]) => h('option', { value: ov, selected: ov === v }, t);
  const sel = (id, label, v, options) => h('label', { for: id }, label,
    h('select', { id, name: id }, options.map(opt(v))));
  const source = h('label', { for: 'source' }, 'Source',
    h('select', { id: 'source', name: 'source' },
      sessionOpts.length ? h('optgroup', { label: 'Sessions' }, sessionOpts.map(opt(value))) : null,
      runOpts.length ? h('optgroup', { label: 'One-shot runs with a network' }, runOpts.map(opt(value))) : null));
  const kind = params.get('kind') || '', verdict = params.get('verdict') || '';
  const form = h('form', {
    class: 'toolbar', onsubmit: ev => {
      ev.preventDefault();
      const q = new URLSearchParams();
      const [k, ...id] = form.elements.source.value.split(':');
      if (id.length) q.set(k === 'execution' ? 'execution' : 'session', id.join(':'));
      for (const n of ['kind', 'verdict']) { const v = form.elements[n].value; if (v) q.set(n, v); }
      location.hash = '#/egress?' + q.toString();
    },
  },
  source,
  sel('kind', 'Kind', kind, [['', 'any'], ['connection', 'connection'], ['dns', 'dns'], ['broker', 'broker'], ['drops', 'drops'], ['policy', 'policy']]),
  sel('verdict', 'Verdict', verdict, [['', 'any'], ['allowed', 'allowed'], ['denied', 'denied'], ['closed', 'closed'], ['failed', 'failed']]),
  h('button', { type: 'submit' }, 'Show'));
  const body = h('div', { id: 'egress-log' });
  show(h('h1', {}, 'Egress'),
    h('p', { class: 'muted' }, 'Every connection, DNS query and broker call a sandbox made, allowed or denied: a session\'s, or a one-shot run\'s that had a network.'),
    form, body);
  if (!src) { body.append(h('p', { class: 'muted' }, 'No sessions or networked runs yet.')); return; }
  const page = await getJSON(egressPath(src), { limit: 200, kind, verdict }, signal);
  const link = src.kind === 'execution'
    ? h('a', { href: '#/executions/' + encodeURIComponent(src.id) }, 'execution ' + src.id)
    : h('a', { href: '#/sessions/' + encodeURIComponent(src.id) }, 'session ' + src.id);
  body.append(h('p', { class: 'muted' }, 'The log of ', link, kind || verdict ? ` (${[kind, verdict].filter(Boolean).join(', ')} only)` : ''),
    page.events.length ? egressTable(page.events, 'Egress events, newest first') : h('p', { class: 'muted' }, 'No egress events match.'));
  announce(`${page.events.length} egress events`);
}

// ---------- routing ----------

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
  let p;
  switch (parts[0]) {
    case 'sessions': p = parts[1] ? renderSession(ctl.signal, parts[1]) : renderSessions(ctl.signal, params.get('all') === '1'); break;
    case 'egress': p = renderEgress(ctl.signal, params); break;
    case 'executions':
    default: p = parts[1] ? renderExecution(ctl.signal, parts[1]) : renderExecutions(ctl.signal, params.get('before')); break;
  }
  // After a move within the page, focus goes to the new content (so a
  // screen reader reads it); on the first load it stays at the top.
  p.then(() => { if (moveFocus) main.focus({ preventScroll: true }); }, err => {
    if (err.name === 'AbortError' || ctl.signal.aborted) return;
    show(errorBox(err));
  });
}

document.getElementById('signout').addEventListener('click', () => signOut('Signed out.'));
window.addEventListener('hashchange', () => render(undefined, true));
render();
