// Airlock console: the tenant's account. Its keys (GET, POST and DELETE
// /v1/keys) and its usage of each quota (GET /v1/usage).
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
        secretBox(document.getElementById('new-key'), 'new-key-secret', 'The new key',
          [h('strong', {}, `Key ${k.name} created.`), ' Copy it now: it is shown this once and cannot be read again.'], k.key);
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
