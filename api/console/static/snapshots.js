// Airlock console: the tenant's snapshots (GET /v1/snapshots), each
// restored into a new session or deleted.
'use strict';

async function renderSnapshots(signal, params) {
  const before = params.get('before') || '';
  show(h('h1', {}, 'Snapshots'), h('p', { class: 'muted' }, 'Loading…'));
  const page = await getJSON('v1/snapshots', { limit: 50, before }, signal);
  const err = h('div', { id: 'snapshots-error' });
  const rows = page.snapshots.map(sn => {
    const restore = h('button', { type: 'button', class: 'small', 'data-busy': 'Restoring…', 'data-restore': sn.snapshot_id, onclick: () => action(restore, err, async () => {
      const s = await send('POST', 'v1/sessions', { from_snapshot: sn.snapshot_id });
      announce(`Restored into session ${s.session_id}`);
      location.hash = '#/sessions/' + encodeURIComponent(s.session_id);
    }) }, 'Restore into a new session');
    const del = confirming('Delete', `Delete snapshot ${sn.name || sn.snapshot_id}?`, { class: 'danger small', 'data-delete': sn.snapshot_id }, async yes => {
      await action(yes, err, async () => {
        await send('DELETE', 'v1/snapshots/' + encodeURIComponent(sn.snapshot_id));
        announce('Snapshot deleted');
        render();
      });
    });
    return h('tr', { 'data-snapshot': sn.snapshot_id },
      h('td', { class: 'wrap' }, sn.name || h('span', { class: 'muted' }, '(no name)')),
      h('td', {}, sn.snapshot_id),
      h('td', {}, h('a', { href: '#/sessions/' + encodeURIComponent(sn.session_id) }, sn.session_id)),
      h('td', { class: 'hide-narrow' }, sn.kind),
      h('td', { class: 'hide-narrow' }, `${sn.image} / ${sn.size}`),
      h('td', {}, bytes(first(sn, 'bytes', 'size_bytes'))),
      h('td', { class: 'hide-narrow' }, when(sn.created_at)),
      h('td', {}, h('span', { class: 'actions' }, restore, del)));
  });
  show(
    h('h1', {}, 'Snapshots'),
    h('p', { class: 'muted' }, 'A snapshot keeps a session\'s workspace, sealed; restoring one starts a new session with those files. Take one from a live session\'s page.'),
    err,
    page.snapshots.length ? table([['Name'], ['Snapshot'], ['Of session'], ['Kind', 'hide-narrow'], ['Image / size', 'hide-narrow'], ['Size'], ['Taken', 'hide-narrow'], ['']],
      rows, 'Snapshots, newest first') : h('p', { class: 'muted', id: 'no-snapshots' }, 'No snapshots.'),
    pager('#/snapshots', page.next_cursor, 'Older snapshots'));
  announce(`${page.snapshots.length} snapshots`);
}
