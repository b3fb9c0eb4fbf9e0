package store

import (
	"context"
	"errors"
	"time"

	"database/sql"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/seal"
)

var (
	_ airlock.KeepStore = (*DB)(nil)
	_ seal.KeyStore     = (*DB)(nil)
)

// Tenant data keys (seal.KeyStore).

const tenantKeyColumns = `tenant_id, id, master_key_id, wrapped, created_at, rotated_at`

func scanTenantKey(row scanner) (*seal.TenantKey, error) {
	var k seal.TenantKey
	var created int64
	var rotated *int64
	if err := row.Scan(&k.TenantID, &k.ID, &k.MasterKeyID, &k.Wrapped, &created, &rotated); err != nil {
		return nil, err
	}
	k.CreatedAt, k.RotatedAt = fromNanos(created), fromNullNanos(rotated)
	return &k, nil
}

// TenantKey returns the tenant's wrapped data key; ENOTFOUND if none.
func (db *DB) TenantKey(ctx context.Context, tenantID string) (*seal.TenantKey, error) {
	ctx, done := db.bound(ctx)
	defer done()
	k, err := scanTenantKey(db.read.QueryRowContext(ctx, `SELECT `+tenantKeyColumns+`
		FROM tenant_data_keys WHERE tenant_id = $1`, tenantID))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, airlock.Errorf(airlock.ENOTFOUND, "tenant %s has no data key", tenantID)
	}
	if err != nil {
		return nil, db.wrap(ctx, "tenant key", err)
	}
	return k, nil
}

// CreateTenantKey records k unless the tenant has a key; it returns the
// tenant's key after the call.
func (db *DB) CreateTenantKey(ctx context.Context, k *seal.TenantKey) (*seal.TenantKey, error) {
	ctx, done := db.bound(ctx)
	defer done()
	_, err := db.write.ExecContext(ctx, `INSERT INTO tenant_data_keys (tenant_id, id, master_key_id, wrapped, created_at)
		VALUES ($1, $2, $3, $4, $5) ON CONFLICT (tenant_id) DO NOTHING`,
		k.TenantID, k.ID, k.MasterKeyID, k.Wrapped, nanos(k.CreatedAt))
	if db.isForeignKey(err) {
		return nil, tenantNotFound(k.TenantID)
	}
	if err != nil {
		return nil, db.wrap(ctx, "create tenant key", err)
	}
	return db.TenantKey(ctx, k.TenantID)
}

// TenantKeys returns every tenant's wrapped data key.
func (db *DB) TenantKeys(ctx context.Context) ([]*seal.TenantKey, error) {
	ctx, done := db.bound(ctx)
	defer done()
	rows, err := db.read.QueryContext(ctx, `SELECT `+tenantKeyColumns+` FROM tenant_data_keys ORDER BY tenant_id`)
	if err != nil {
		return nil, db.wrap(ctx, "tenant keys", err)
	}
	defer rows.Close()
	var out []*seal.TenantKey
	for rows.Next() {
		k, err := scanTenantKey(rows)
		if err != nil {
			return nil, db.wrap(ctx, "tenant keys", err)
		}
		out = append(out, k)
	}
	return out, db.wrap(ctx, "tenant keys", rows.Err())
}

// RewrapTenantKey replaces a data key's wrapping if it is still wrapped
// under oldMasterKeyID; ECONFLICT otherwise.
func (db *DB) RewrapTenantKey(ctx context.Context, tenantID, id, oldMasterKeyID, newMasterKeyID string, wrapped []byte, at time.Time) error {
	ctx, done := db.bound(ctx)
	defer done()
	res, err := db.write.ExecContext(ctx, `UPDATE tenant_data_keys SET master_key_id = $1, wrapped = $2, rotated_at = $3
		WHERE tenant_id = $4 AND id = $5 AND master_key_id = $6`, newMasterKeyID, wrapped, nanos(at), tenantID, id, oldMasterKeyID)
	if err != nil {
		return db.wrap(ctx, "rewrap tenant key", err)
	}
	if affected(res) != 1 {
		return airlock.Errorf(airlock.ECONFLICT, "the data key of tenant %s changed during rotation", tenantID)
	}
	return nil
}

// Snapshots.

const snapshotColumns = `id, tenant_id, session_id, name, kind, image, size, bytes, sha256, entries, key_id, blob_key, created_at, runtime`

func scanSnapshot(row scanner) (*airlock.Snapshot, error) {
	var s airlock.Snapshot
	var created int64
	if err := row.Scan(&s.ID, &s.TenantID, &s.SessionID, &s.Name, &s.Kind, &s.Image, &s.Size, &s.Bytes, &s.SHA256,
		&s.Entries, &s.KeyID, &s.BlobKey, &created, &s.Runtime); err != nil {
		return nil, err
	}
	s.CreatedAt = fromNanos(created)
	return &s, nil
}

// CreateSnapshot records a snapshot whose blob is stored.
func (db *DB) CreateSnapshot(ctx context.Context, s *airlock.Snapshot) error {
	ctx, done := db.bound(ctx)
	defer done()
	if s.ID == "" || s.TenantID == "" || s.BlobKey == "" {
		return airlock.Errorf(airlock.EINVALID, "snapshot id, tenant and blob are required")
	}
	_, err := db.write.ExecContext(ctx, `INSERT INTO snapshots (`+snapshotColumns+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)`,
		s.ID, s.TenantID, s.SessionID, db.text(s.Name), string(s.Kind), s.Image, string(s.Size), s.Bytes, s.SHA256, s.Entries, s.KeyID, s.BlobKey, nanos(s.CreatedAt), s.Runtime)
	switch {
	case db.isForeignKey(err):
		return tenantNotFound(s.TenantID)
	case db.isUnique(err):
		return airlock.Errorf(airlock.ECONFLICT, "snapshot %s exists", s.ID)
	}
	return db.wrap(ctx, "create snapshot", err)
}

func snapshotNotFound(id string) error {
	return &airlock.Error{Code: airlock.ENOTFOUND, Type: "snapshot-not-found", Message: "no snapshot " + id, Err: airlock.ErrNotFound}
}

// Snapshot returns the tenant's snapshot; another tenant's is ENOTFOUND.
func (db *DB) Snapshot(ctx context.Context, tenantID, id string) (*airlock.Snapshot, error) {
	ctx, done := db.bound(ctx)
	defer done()
	s, err := scanSnapshot(db.read.QueryRowContext(ctx, `SELECT `+snapshotColumns+` FROM snapshots WHERE id = $1 AND tenant_id = $2`, id, tenantID))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, snapshotNotFound(id)
	}
	if err != nil {
		return nil, db.wrap(ctx, "get snapshot", err)
	}
	return s, nil
}

// ListSnapshots returns a page of the tenant's snapshots, newest first.
func (db *DB) ListSnapshots(ctx context.Context, tenantID, before string, limit int) ([]*airlock.Snapshot, error) {
	ctx, done := db.bound(ctx)
	defer done()
	if limit <= 0 {
		limit = DefaultListLimit
	}
	limit = min(limit, MaxListLimit)
	var out []*airlock.Snapshot
	err := db.inReadTx(ctx, func(tx *sql.Tx) error {
		var rows *sql.Rows
		var err error
		if before == "" {
			rows, err = tx.QueryContext(ctx, `SELECT `+snapshotColumns+` FROM snapshots WHERE tenant_id = $1
				ORDER BY created_at DESC, id DESC LIMIT $2`, tenantID, limit)
		} else {
			var at int64
			err = tx.QueryRowContext(ctx, `SELECT created_at FROM snapshots WHERE id = $1 AND tenant_id = $2`, before, tenantID).Scan(&at)
			if errors.Is(err, sql.ErrNoRows) {
				return airlock.Problem(airlock.EINVALID, "invalid-cursor", "unknown cursor %q", before)
			} else if err != nil {
				return err
			}
			rows, err = tx.QueryContext(ctx, `SELECT `+snapshotColumns+` FROM snapshots WHERE tenant_id = $1 AND (created_at, id) < ($2, $3)
				ORDER BY created_at DESC, id DESC LIMIT $4`, tenantID, at, before, limit)
		}
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			s, err := scanSnapshot(rows)
			if err != nil {
				return err
			}
			out = append(out, s)
		}
		return rows.Err()
	})
	return out, db.wrap(ctx, "list snapshots", err)
}

// DeleteSnapshot deletes the tenant's snapshot record; ENOTFOUND if none.
func (db *DB) DeleteSnapshot(ctx context.Context, tenantID, id string) error {
	ctx, done := db.bound(ctx)
	defer done()
	res, err := db.write.ExecContext(ctx, `DELETE FROM snapshots WHERE id = $1 AND tenant_id = $2`, id, tenantID)
	if err != nil {
		return db.wrap(ctx, "delete snapshot", err)
	}
	if affected(res) == 0 {
		return snapshotNotFound(id)
	}
	return nil
}

// SnapshotBytes sums the sealed size of the tenant's snapshots, of
// workspaces and of volumes: one quota holds both.
func (db *DB) SnapshotBytes(ctx context.Context, tenantID string) (int64, error) {
	ctx, done := db.bound(ctx)
	defer done()
	var n int64
	err := db.read.QueryRowContext(ctx, `SELECT CAST(
		(SELECT coalesce(sum(bytes), 0) FROM snapshots WHERE tenant_id = $1) +
		(SELECT coalesce(sum(bytes), 0) FROM volume_snapshots WHERE tenant_id = $1) AS BIGINT)`, tenantID).Scan(&n)
	return n, db.wrap(ctx, "snapshot bytes", err)
}

// Pauses.

// PutPause records (or replaces) a session's pause.
func (db *DB) PutPause(ctx context.Context, p *airlock.SessionPause) error {
	ctx, done := db.bound(ctx)
	defer done()
	_, err := db.write.ExecContext(ctx, `INSERT INTO session_pauses (session_id, tenant_id, dir, backend, paused_at, bytes)
		VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (session_id) DO UPDATE SET dir = excluded.dir, backend = excluded.backend,
		paused_at = excluded.paused_at, bytes = excluded.bytes`,
		p.SessionID, p.TenantID, p.Dir, p.Backend, nanos(p.PausedAt), p.Bytes)
	if db.isForeignKey(err) {
		return tenantNotFound(p.TenantID)
	}
	return db.wrap(ctx, "put pause", err)
}

func scanPause(row scanner) (*airlock.SessionPause, error) {
	var p airlock.SessionPause
	var at int64
	if err := row.Scan(&p.SessionID, &p.TenantID, &p.Dir, &p.Backend, &at, &p.Bytes); err != nil {
		return nil, err
	}
	p.PausedAt = fromNanos(at)
	return &p, nil
}

// Pause returns the tenant's session's pause; ENOTFOUND if none.
func (db *DB) Pause(ctx context.Context, tenantID, sessionID string) (*airlock.SessionPause, error) {
	ctx, done := db.bound(ctx)
	defer done()
	p, err := scanPause(db.read.QueryRowContext(ctx, `SELECT session_id, tenant_id, dir, backend, paused_at, bytes
		FROM session_pauses WHERE session_id = $1 AND tenant_id = $2`, sessionID, tenantID))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, airlock.Errorf(airlock.ENOTFOUND, "session %s is not paused", sessionID)
	}
	return p, db.wrap(ctx, "pause", err)
}

// DeletePause removes a session's pause (none is no error).
func (db *DB) DeletePause(ctx context.Context, sessionID string) error {
	ctx, done := db.bound(ctx)
	defer done()
	_, err := db.write.ExecContext(ctx, `DELETE FROM session_pauses WHERE session_id = $1`, sessionID)
	return db.wrap(ctx, "delete pause", err)
}

// Pauses returns every pause, oldest first.
func (db *DB) Pauses(ctx context.Context) ([]*airlock.SessionPause, error) {
	ctx, done := db.bound(ctx)
	defer done()
	rows, err := db.read.QueryContext(ctx, `SELECT session_id, tenant_id, dir, backend, paused_at, bytes FROM session_pauses ORDER BY paused_at, session_id`)
	if err != nil {
		return nil, db.wrap(ctx, "pauses", err)
	}
	defer rows.Close()
	var out []*airlock.SessionPause
	for rows.Next() {
		p, err := scanPause(rows)
		if err != nil {
			return nil, db.wrap(ctx, "pauses", err)
		}
		out = append(out, p)
	}
	return out, db.wrap(ctx, "pauses", rows.Err())
}
