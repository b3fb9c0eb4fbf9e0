// Airlock console: the tenant's events. The event feed (GET
// /v1/events?cursor=&order=newest), newest first, 50 at a time with
// "Load more", for every session or one (?session=); and the abuse
// detectors' events with their evidence (GET /v1/events without a
// cursor, paged by ?before=).
'use strict';

const FEED_PAGE = 50;

// feedPath is the feed's path: the cursor must be sent even when empty
// (without it GET /v1/events answers abuse events), and apiURL leaves
// empty parameters out.
function feedPath(cursor) {
  return 'v1/events?cursor=' + encodeURIComponent(cursor || '');
}

// eventNote is what an event carries besides its type and session, as
// text: the reason and detail, and the data (an abuse decision's
// detector, action and summary; anything else as key=value).
function eventNote(e) {
  const d = e.data || {};
  const parts = [];
  if (e.reason) parts.push(e.reason);
  if (e.detail) parts.push(e.detail);
  if (e.type === 'abuse.detected') {
    parts.push([d.detector, d.action, d.summary].filter(Boolean).join(', '));
  } else {
    for (const [k, v] of Object.entries(d)) parts.push(`${k}=${typeof v === 'object' ? JSON.stringify(v) : v}`);
  }
  return parts.filter(Boolean).join('; ');
}

// feedRow is one event of the feed, linking to its session.
function feedRow(e) {
  return h('tr', { 'data-feed-event': e.id, 'data-type': e.type },
    h('td', {}, when(e.at)),
    h('td', {}, badge(e.type)),
    h('td', {}, e.session_id ? h('a', { href: '#/sessions/' + encodeURIComponent(e.session_id) }, e.session_id) : ''),
    h('td', { class: 'wrap' }, eventNote(e)),
    h('td', { class: 'hide-narrow' }, h('code', {}, e.id)));
}

// feedSection is the feed, newest first, for one session or all, with a
// form to pick the session and a "Load more" button that follows
// next_cursor to older events.
async function feedSection(signal, session) {
  const err = h('div', { id: 'feed-error' });
  const list = h('div', { id: 'feed' }, table([['Time'], ['Event'], ['Session'], ['Detail'], ['ID', 'hide-narrow']], [], 'Events, newest first'));
  const rows = list.querySelector('tbody');
  const more = h('button', { type: 'button', id: 'feed-more', class: 'quiet', 'data-busy': 'Loading…', hidden: true }, 'Load more');
  const count = h('p', { class: 'muted', id: 'feed-count' });
  let cursor = '', shown = 0;
  const load = async () => {
    const page = await getJSON(feedPath(cursor), { order: 'newest', limit: FEED_PAGE, session_id: session }, signal);
    rows.append(...page.events.map(feedRow));
    shown += page.events.length;
    cursor = page.next_cursor;
    // A short page is the last: there is nothing older.
    more.hidden = page.events.length < FEED_PAGE;
    count.textContent = shown ? `${shown} events, newest first${more.hidden ? '' : '; older ones follow'}.` : '';
    return page.events.length;
  };
  more.addEventListener('click', () => action(more, err, async () => {
    const n = await load();
    announce(`${n} older events`);
  }));
  const filter = h('input', { id: 'feed-session', name: 'session', value: session, placeholder: 'every session', spellcheck: 'false', autocomplete: 'off' });
  const form = h('form', {
    class: 'toolbar', id: 'feed-filter', onsubmit: ev => {
      ev.preventDefault();
      const v = filter.value.trim();
      location.hash = '#/events' + (v ? '?session=' + encodeURIComponent(v) : '');
    },
  },
  h('label', { for: 'feed-session' }, 'Session', filter),
  h('button', { type: 'submit' }, 'Show'),
  session ? h('a', { href: '#/events' }, 'Every session') : null);
  const body = await load() ? list : h('p', { class: 'muted', id: 'no-feed' }, session ? 'No events of this session.' : 'No events.');
  return h('section', { 'aria-labelledby': 'feed-h' },
    h('h2', { id: 'feed-h' }, session ? `Events of session ${session}` : 'Event feed'),
    h('p', { class: 'muted' }, 'Every session transition (created, paused, resumed, ended with its reason, killed by an abuse detector) and every abuse decision, as webhooks receive them.'),
    form, body, count, more, err);
}

// abuseSection is the abuse detectors' events with their evidence, 50 a
// page, older ones by ?before=.
async function abuseSection(signal, params) {
  const ev = await getJSON('v1/events', { limit: 50, before: params.get('before') || '' }, signal);
  const rows = ev.events.map(e => h('tr', { 'data-event': e.event_id },
    h('td', {}, when(e.occurred_at)),
    h('td', {}, badge(e.detector)),
    h('td', { class: 'wrap' }, e.summary),
    h('td', {}, e.action),
    h('td', {}, e.session_id ? h('a', { href: '#/sessions/' + encodeURIComponent(e.session_id) }, e.session_id)
      : e.execution_id ? h('a', { href: '#/executions/' + encodeURIComponent(e.execution_id) }, e.execution_id) : ''),
    h('td', { class: 'wrap hide-narrow' }, e.evidence ? h('details', {}, h('summary', {}, 'evidence'), h('pre', {}, JSON.stringify(e.evidence, null, 2))) : '')));
  return h('section', { 'aria-labelledby': 'abuse-h' }, h('h2', { id: 'abuse-h' }, 'Abuse events'),
    h('p', { class: 'muted' }, 'What the abuse detectors found in this tenant\'s sandboxes (mining, scanning, fork bombs), what they did, and the evidence.'),
    rows.length ? table([['Time'], ['Detector'], ['Summary'], ['Action'], ['Of'], ['Evidence', 'hide-narrow']], rows, 'Abuse events, newest first')
      : h('p', { class: 'muted', id: 'no-abuse' }, 'No abuse events.'),
    ev.next_cursor ? h('p', { class: 'pager' }, h('a', { href: '#/events?before=' + encodeURIComponent(ev.next_cursor) }, 'Older abuse events')) : null);
}

async function renderEvents(signal, params) {
  show(h('h1', {}, 'Events'), h('p', { class: 'muted' }, 'Loading…'));
  const session = params.get('session') || '';
  const [feed, abuse] = await Promise.all([feedSection(signal, session), session ? null : abuseSection(signal, params)]);
  show(h('h1', {}, 'Events'), feed, abuse);
  announce(session ? `Events of session ${session}` : 'Events');
}
