// Airlock console: webhooks (GET, POST and DELETE /v1/webhooks), the
// URLs that receive the tenant's events, signed. Create one (its signing
// secret shown once, with a copy button), delete one; a webhook's page
// is its delivery log (GET /v1/webhooks/{id}/deliveries), newest first,
// with each delivery's state and tries, and replay (POST
// .../deliveries/{delivery_id}/replay).
'use strict';

// The event types a webhook may take (airlock.EventTypes).
const EVENT_TYPES = ['session.created', 'session.paused', 'session.resumed', 'session.ended', 'session.abuse_killed', 'abuse.detected'];

function webhookPath(id) { return 'v1/webhooks/' + encodeURIComponent(id); }

async function renderWebhooks(signal) {
  show(h('h1', {}, 'Webhooks'), h('p', { class: 'muted' }, 'Loading…'));
  const list = await getJSON('v1/webhooks', null, signal);
  const err = h('div', { id: 'webhooks-error' });
  const created = h('div', { id: 'new-webhook' });
  const rows = list.webhooks.map(w => {
    const del = confirming('Delete', 'Delete this webhook and its pending deliveries?', { class: 'danger small', 'data-delete-webhook': w.webhook_id }, async yes => {
      await action(yes, err, async () => {
        await send('DELETE', webhookPath(w.webhook_id));
        announce('Webhook deleted');
        render();
      });
    });
    return h('tr', { 'data-webhook': w.webhook_id },
      h('td', { class: 'wrap' }, h('a', { href: '#/webhooks/' + encodeURIComponent(w.webhook_id) }, w.url)),
      h('td', { class: 'wrap' }, w.events && w.events.length ? w.events.join(', ') : 'every event'),
      h('td', { class: 'hide-narrow' }, when(w.created_at)),
      h('td', {}, h('a', { href: '#/webhooks/' + encodeURIComponent(w.webhook_id), 'data-deliveries': w.webhook_id }, 'Deliveries')),
      h('td', {}, del));
  });
  const url = h('input', { id: 'webhook-url', name: 'url', type: 'url', required: true, spellcheck: 'false', autocomplete: 'off', placeholder: 'https://hooks.example.com/airlock' });
  const types = EVENT_TYPES.map(t => h('label', { class: 'check' }, h('input', { type: 'checkbox', name: 'events', value: t }), ' ', t));
  const submit = h('button', { type: 'submit', 'data-busy': 'Creating…' }, 'Create webhook');
  const form = h('form', {
    class: 'card toolbar', id: 'create-webhook', onsubmit: ev => {
      ev.preventDefault();
      const events = [...form.querySelectorAll('input[name=events]:checked')].map(i => i.value);
      const req = { url: url.value.trim() };
      if (events.length) req.events = events;
      action(submit, err, async () => {
        const w = await send('POST', 'v1/webhooks', req);
        await renderWebhooks(signal); // the list with the new webhook, then its secret, once
        secretBox(document.getElementById('new-webhook'), 'new-webhook-secret', 'The webhook\'s signing secret',
          [h('strong', {}, 'Webhook created.'), ' Its signing secret is below. Copy it now: it is shown this once and cannot be read again. Receivers check Airlock-Signature with it.'], w.secret);
        announce('Webhook created');
      });
    },
  },
  h('h2', { class: 'full' }, 'New webhook'),
  h('label', { for: 'webhook-url', class: 'full' }, 'URL', url),
  h('fieldset', { class: 'full types' }, h('legend', {}, 'Events (none ticked: every event)'), types),
  submit);
  show(
    h('h1', {}, 'Webhooks'),
    h('p', { class: 'muted' }, 'Each webhook receives this tenant\'s events as signed POST requests (Airlock-Signature: t=<unix>,v1=<HMAC-SHA256 of "<t>.<body>">), retried with back-off for a day.'),
    form, created, err,
    rows.length ? table([['URL'], ['Events'], ['Created', 'hide-narrow'], ['Log'], ['']], rows, 'Webhooks')
      : h('p', { class: 'muted', id: 'no-webhooks' }, 'No webhooks.'));
  announce(`${rows.length} webhooks`);
}

// renderWebhook is one webhook's delivery log, 50 a page, older ones by
// ?before=; each delivery can be sent again.
async function renderWebhook(signal, id, params) {
  show(h('h1', {}, 'Webhook'), h('p', { class: 'muted' }, 'Loading…'));
  const before = params.get('before') || '';
  const [list, page] = await Promise.all([
    getJSON('v1/webhooks', null, signal),
    getJSON(webhookPath(id) + '/deliveries', { limit: 50, before }, signal)]);
  const w = list.webhooks.find(x => x.webhook_id === id);
  const err = h('div', { id: 'deliveries-error' });
  const rows = page.deliveries.map(d => {
    const replay = h('button', { type: 'button', class: 'small', 'data-busy': 'Queuing…', 'data-replay': d.delivery_id, onclick: () => action(replay, err, async () => {
      await send('POST', webhookPath(id) + '/deliveries/' + encodeURIComponent(d.delivery_id) + '/replay');
      announce('Delivery queued again');
      render();
    }) }, 'Replay');
    return h('tr', { 'data-delivery': d.delivery_id },
      h('td', {}, when(d.created_at)),
      h('td', {}, d.event_type),
      h('td', {}, badge(d.state)),
      h('td', { class: 'tries' }, String(d.attempts)),
      h('td', {}, d.last_status ? String(d.last_status) : ''),
      h('td', { class: 'wrap' }, d.last_error || ''),
      h('td', { class: 'hide-narrow' }, d.delivered_at ? 'delivered ' + when(d.delivered_at) : d.next_attempt_at ? 'next ' + when(d.next_attempt_at) : ''),
      h('td', { class: 'hide-narrow' }, h('code', {}, d.event_id)),
      h('td', {}, replay));
  });
  show(
    h('p', { class: 'crumbs' }, h('a', { href: '#/webhooks' }, '← Webhooks')),
    h('h1', {}, 'Webhook ', h('span', { id: 'webhook-url-shown' }, w ? w.url : id)),
    w ? facts([['ID', w.webhook_id], ['Events', w.events && w.events.length ? w.events.join(', ') : 'every event'], ['Created', when(w.created_at)]]) : null,
    h('h2', {}, 'Deliveries'),
    h('p', { class: 'muted' }, 'Newest first. A delivery is pending until the receiver answers 2xx (delivered) or its tries run out (failed); Replay sends it again now, whatever its state.'),
    err,
    rows.length ? table([['Queued'], ['Event'], ['State'], ['Tries'], ['Last status'], ['Last error'], ['When', 'hide-narrow'], ['Event ID', 'hide-narrow'], ['']], rows, 'Deliveries, newest first')
      : h('p', { class: 'muted', id: 'no-deliveries' }, 'No deliveries yet.'),
    pager('#/webhooks/' + encodeURIComponent(id), page.next_cursor, 'Older deliveries'));
  announce(`${rows.length} deliveries`);
}
