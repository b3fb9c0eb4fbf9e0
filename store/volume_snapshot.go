package store

import (
	"context"
	"database/sql"
	"errors"

	"github.com/airlockhq/airlock"
)

// Volume snapshots (airlock.VolumeSnapshotStore).

var _ airlock.VolumeSnapshotStore = (*DB)(nil)

const volumeSnapshotColumns = `id, tenant_id, volume, name, size_mib, bytes, sha256, entries, key_id, blob_key, node_id, created_at`

func scanVolumeSnapshot(row scanner) (*airlock.VolumeSnapshot, error) {
	var s airlock.VolumeSnapshot
	var created int64
	if err := row.Scan(&s.ID, &s.TenantID, &s.Volume, &s.Name, &s.SizeMiB, &s.Bytes, &s.SHA256, &s.Entries,
		&s.KeyID, &s.BlobKey, &s.Node, &created); err != nil {
		return nil, err
	}
	s.CreatedAt = fromNanos(created)
	return &s, nil
}

// VolumeSnapshotNotFound is the answer for a volume snapshot the tenant
// does not have.
func VolumeSnapshotNotFound(id string) error {
	return &airlock.Error{Code: airlock.ENOTFOUND, Type: "volume-snapshot-not-found", Message: "no volume snapshot " + id, Err: airlock.ErrNotFound}
}

// CreateVolumeSnapshot records a volume snapshot whose blob is stored.
func (db *DB) CreateVolumeSnapshot(ctx context.Context, s *airlock.VolumeSnapshot) error {
	ctx, done := db.bound(ctx)
	defer done()
	if s.ID == "" || s.TenantID == "" || s.BlobKey == "" || s.Volume == "" {
		return airlock.Errorf(airlock.EINVALID, "volume snapshot id, tenant, volume and blob are required")
	}
	_, err := db.write.ExecContext(ctx, `INSERT INTO volume_snapshots (`+volumeSnapshotColumns+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)`,
		s.ID, s.TenantID, s.Volume, db.text(s.Name), s.SizeMiB, s.Bytes, s.SHA256, s.Entries, s.KeyID, s.BlobKey, s.Node, nanos(s.CreatedAt))
	switch {
	case db.isForeignKey(err):
		return tenantNotFound(s.TenantID)
	case db.isUnique(err):
		return airlock.Errorf(airlock.ECONFLICT, "volume snapshot %s exists", s.ID)
	}
	return db.wrap(ctx, "create volume snapshot", err)
}

// VolumeSnapshot returns the tenant's volume snapshot; another tenant's
// is ENOTFOUND.
func (db *DB) VolumeSnapshot(ctx context.Context, tenantID, id string) (*airlock.VolumeSnapshot, error) {
	ctx, done := db.bound(ctx)
	defer done()
	s, err := scanVolumeSnapshot(db.read.QueryRowContext(ctx, `SELECT `+volumeSnapshotColumns+` FROM volume_snapshots WHERE id = $1 AND tenant_id = $2`, id, tenantID))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, VolumeSnapshotNotFound(id)
	}
	if err != nil {
		return nil, db.wrap(ctx, "get volume snapshot", err)
	}
	return s, nil
}

// ListVolumeSnapshots returns the snapshots of the tenant's volume of
// that name, newest first.
func (db *DB) ListVolumeSnapshots(ctx context.Context, tenantID, volume string) ([]*airlock.VolumeSnapshot, error) {
	ctx, done := db.bound(ctx)
	defer done()
	rows, err := db.read.QueryContext(ctx, `SELECT `+volumeSnapshotColumns+` FROM volume_snapshots WHERE tenant_id = $1 AND volume = $2
		ORDER BY created_at DESC, id DESC`, tenantID, volume)
	if err != nil {
		return nil, db.wrap(ctx, "list volume snapshots", err)
	}
	defer rows.Close()
	out := []*airlock.VolumeSnapshot{}
	for rows.Next() {
		s, err := scanVolumeSnapshot(rows)
		if err != nil {
			return nil, db.wrap(ctx, "list volume snapshots", err)
		}
		out = append(out, s)
	}
	return out, db.wrap(ctx, "list volume snapshots", rows.Err())
}

// DeleteVolumeSnapshot deletes the tenant's volume snapshot record;
// ENOTFOUND if none.
func (db *DB) DeleteVolumeSnapshot(ctx context.Context, tenantID, id string) error {
	ctx, done := db.bound(ctx)
	defer done()
	res, err := db.write.ExecContext(ctx, `DELETE FROM volume_snapshots WHERE id = $1 AND tenant_id = $2`, id, tenantID)
	if err != nil {
		return db.wrap(ctx, "delete volume snapshot", err)
	}
	if affected(res) == 0 {
		return VolumeSnapshotNotFound(id)
	}
	return nil
}
