// Airlock console: executions (one-shot runs and the runs of sessions),
// with their phases, output and artifacts.
'use strict';

const PHASES = ['acquire', 'hand_in', 'run', 'collect', 'destroy'];

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
    ['Peak memory', memory(e, 'peak_memory')], ['Started', when(e.created_at)],
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
    const get = () => blobOf('v1/artifacts/' + encodeURIComponent(a.id), null, signal);
    card.append(h('figcaption', {}, h('strong', {}, a.filename), ' ', h('span', { class: 'muted' }, `${a.content_type}, ${bytes(first(a, 'size_bytes', 'size'))}`), ' ',
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

