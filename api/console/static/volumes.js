// Airlock console: volumes (GET, POST and DELETE /v1/volumes), the
// tenant's named disks that outlive sessions: each with its size and the
// live sessions that have it mounted; create one; delete one (409
// volume-in-use while a session has it mounted).
'use strict';

async function renderVolumes(signal) {
  show(h('h1', {}, 'Volumes'), h('p', { class: 'muted' }, 'Loading…'));
  const list = await getJSON('v1/volumes', null, signal);
  const err = h('div', { id: 'volumes-error' });
  const rows = list.volumes.map(v => {
    const mounts = v.mounts || [];
    const del = confirming('Delete', `Delete volume ${v.name} and its data?`, { class: 'danger small', 'data-delete-volume': v.name }, async yes => {
      await action(yes, err, async () => {
        await send('DELETE', 'v1/volumes/' + encodeURIComponent(v.name));
        announce(`Volume ${v.name} deleted`);
        render();
      });
    });
    return h('tr', { 'data-volume': v.name },
      h('td', { class: 'wrap' }, v.name),
      h('td', {}, bytes(v.size_mib * 1048576)),
      h('td', { class: 'wrap used-by' }, mounts.length ? mounts.map((m, i) => [i ? ', ' : '',
        h('a', { href: '#/sessions/' + encodeURIComponent(m.session_id) }, m.session_id),
        ` at ${m.path}${m.read_only ? ' (read-only)' : ''}`]) : h('span', { class: 'muted' }, 'no session')),
      h('td', { class: 'hide-narrow' }, v.node || ''),
      h('td', { class: 'hide-narrow' }, when(v.created_at)),
      h('td', {}, del));
  });
  const name = h('input', { id: 'volume-name', name: 'name', required: true, spellcheck: 'false', autocomplete: 'off', placeholder: 'e.g. data' });
  const size = h('input', { id: 'volume-size', name: 'size_mib', type: 'number', required: true, min: 16, step: 1, value: 1024 });
  const submit = h('button', { type: 'submit', 'data-busy': 'Creating…' }, 'Create volume');
  const form = h('form', {
    class: 'card toolbar', id: 'create-volume', onsubmit: ev => {
      ev.preventDefault();
      action(submit, err, async () => {
        const v = await send('POST', 'v1/volumes', { name: name.value.trim(), size_mib: Number(size.value) });
        announce(`Volume ${v.name} created`);
        render();
      });
    },
  },
  h('h2', { class: 'full' }, 'New volume'),
  h('label', { for: 'volume-name' }, 'Name', name),
  h('label', { for: 'volume-size' }, 'Size (MiB)', size),
  submit);
  show(
    h('h1', {}, 'Volumes'),
    h('p', { class: 'muted' }, 'A volume keeps its files from one session to the next. Mount one when a session is created ("volumes": [{"name", "path"}] on POST /v1/sessions); one session writes to it at a time. Its size counts in the volume quota.'),
    form, err,
    rows.length ? table([['Name'], ['Size'], ['Used by'], ['Node', 'hide-narrow'], ['Created', 'hide-narrow'], ['']], rows, 'Volumes')
      : h('p', { class: 'muted', id: 'no-volumes' }, 'No volumes.'));
  announce(`${rows.length} volumes`);
}
