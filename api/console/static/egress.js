// Airlock console: the egress log of sessions and of networked one-shot
// runs, filtered by kind and verdict.
'use strict';


// egressTable renders egress events (newest first) as a table.
function egressTable(events, caption) {
  const rows = events.map(e => h('tr', {},
    h('td', {}, when(e.time)), h('td', {}, e.kind), h('td', {}, badge(e.verdict)),
    h('td', { class: 'wrap' }, [e.name, e.port ? ':' + e.port : ''].join('')),
    h('td', { class: 'hide-narrow' }, e.protocol || ''),
    h('td', { class: 'hide-narrow' }, `${bytes(e.bytes_up)} / ${bytes(e.bytes_down)}`),
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

