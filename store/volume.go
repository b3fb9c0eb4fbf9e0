package store

import (
	"context"
	"database/sql"
	"errors"

	"github.com/airlockhq/airlock"
)

var _ airlock.VolumeStore = (*DB)(nil)

func volumeNotFound(name string) error {
	return &airlock.Error{Code: airlock.ENOTFOUND, Type: "volume-not-found", Message: "no volume " + name, Err: airlock.ErrNotFound}
}

// VolumeQuotaProblem is the refusal of a volume that would take the
// tenant's volumes past their quota.
func VolumeQuotaProblem(usedMiB, wantMiB, maxMiB int64) error {
	return airlock.Problem(airlock.ERATELIMITED, "volume-quota",
		"the tenant's volumes hold %d MiB of its %d MiB (volume_bytes quota); %d MiB more do not fit: delete a volume (DELETE /v1/volumes/{name}) or ask the operator for more", usedMiB, maxMiB, wantMiB)
}

// CreateVolume records a volume if the tenant's volumes then hold at most
// maxTotalMiB (-1: no limit).
func (db *DB) CreateVolume(ctx context.Context, v *airlock.Volume, maxTotalMiB int64) error {
	ctx, done := db.bound(ctx)
	defer done()
	if v.TenantID == "" || !airlock.ValidVolumeName(v.Name) || v.SizeMiB <= 0 {
		return airlock.Errorf(airlock.EINVALID, "volume tenant, name and size are required")
	}
	err := db.inWriteTx(ctx, func(tx *sql.Tx) error {
		if maxTotalMiB >= 0 {
			var used int64
			if err := tx.QueryRowContext(ctx, `SELECT COALESCE(SUM(size_mib), 0) FROM volumes WHERE tenant_id = $1`, v.TenantID).Scan(&used); err != nil {
				return err
			}
			if used+v.SizeMiB > maxTotalMiB {
				return VolumeQuotaProblem(used, v.SizeMiB, maxTotalMiB)
			}
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO volumes (tenant_id, name, size_mib, node_id, created_at) VALUES ($1, $2, $3, $4, $5)`,
			v.TenantID, v.Name, v.SizeMiB, v.Node, nanos(v.CreatedAt))
		return err
	})
	switch {
	case db.isForeignKey(err):
		return tenantNotFound(v.TenantID)
	case db.isUnique(err):
		return airlock.Problem(airlock.ECONFLICT, "volume-exists", "volume %s exists", v.Name)
	}
	return db.wrap(ctx, "create volume", err)
}

// Volume returns the tenant's volume with its mounts.
func (db *DB) Volume(ctx context.Context, tenantID, name string) (*airlock.Volume, error) {
	ctx, done := db.bound(ctx)
	defer done()
	vs, err := db.volumes(ctx, tenantID, name)
	if err != nil {
		return nil, db.wrap(ctx, "volume", err)
	}
	if len(vs) == 0 {
		return nil, volumeNotFound(name)
	}
	return vs[0], nil
}

// ListVolumes returns the tenant's volumes by name, with their mounts.
func (db *DB) ListVolumes(ctx context.Context, tenantID string) ([]*airlock.Volume, error) {
	ctx, done := db.bound(ctx)
	defer done()
	vs, err := db.volumes(ctx, tenantID, "")
	return vs, db.wrap(ctx, "list volumes", err)
}

// volumes reads the tenant's volumes (one, if name is set) and their
// claims in one snapshot.
func (db *DB) volumes(ctx context.Context, tenantID, name string) ([]*airlock.Volume, error) {
	out := []*airlock.Volume{}
	err := db.inReadTx(ctx, func(tx *sql.Tx) error {
		out = out[:0]
		rows, err := tx.QueryContext(ctx, `SELECT name, size_mib, node_id, created_at FROM volumes
			WHERE tenant_id = $1 AND ($2 = '' OR name = $2) ORDER BY name`, tenantID, name)
		if err != nil {
			return err
		}
		byName := map[string]*airlock.Volume{}
		for rows.Next() {
			v := &airlock.Volume{TenantID: tenantID, Mounts: []airlock.VolumeMountInfo{}}
			var created int64
			if err := rows.Scan(&v.Name, &v.SizeMiB, &v.Node, &created); err != nil {
				rows.Close()
				return err
			}
			v.CreatedAt = fromNanos(created)
			out = append(out, v)
			byName[v.Name] = v
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		rows, err = tx.QueryContext(ctx, `SELECT volume, session_id, path, read_only, mounted_at FROM volume_claims
			WHERE tenant_id = $1 AND ($2 = '' OR volume = $2) ORDER BY mounted_at, session_id`, tenantID, name)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var vol string
			var m airlock.VolumeMountInfo
			var at int64
			if err := rows.Scan(&vol, &m.SessionID, &m.Path, &m.ReadOnly, &at); err != nil {
				return err
			}
			m.MountedAt = fromNanos(at)
			if v := byName[vol]; v != nil {
				v.Mounts = append(v.Mounts, m)
			}
		}
		return rows.Err()
	})
	return out, err
}

// DeleteVolume drops a volume no session has mounted.
func (db *DB) DeleteVolume(ctx context.Context, tenantID, name string) error {
	ctx, done := db.bound(ctx)
	defer done()
	res, err := db.write.ExecContext(ctx, `DELETE FROM volumes WHERE tenant_id = $1 AND name = $2`, tenantID, name)
	if db.isForeignKey(err) {
		return volumeInUse(name)
	}
	if err != nil {
		return db.wrap(ctx, "delete volume", err)
	}
	if affected(res) == 0 {
		return volumeNotFound(name)
	}
	return nil
}

func volumeInUse(name string) error {
	return airlock.Problem(airlock.ECONFLICT, "volume-in-use", "volume %s is mounted by a live session; end the session (DELETE /v1/sessions/{id}) first", name)
}

// VolumeMiB is the sum of the sizes of the tenant's volumes.
func (db *DB) VolumeMiB(ctx context.Context, tenantID string) (int64, error) {
	ctx, done := db.bound(ctx)
	defer done()
	var n int64
	err := db.read.QueryRowContext(ctx, `SELECT COALESCE(SUM(size_mib), 0) FROM volumes WHERE tenant_id = $1`, tenantID).Scan(&n)
	return n, db.wrap(ctx, "volume size", err)
}

// VolumeBusyProblem is the refusal of a second writer.
func VolumeBusyProblem(name string) error {
	return airlock.Problem(airlock.ECONFLICT, "volume-busy",
		"volume %s is mounted read-write by another session; one writer at a time: ask for \"read_only\": true, or end that session first", name)
}

// ClaimVolumes records every claim or none.
func (db *DB) ClaimVolumes(ctx context.Context, claims []airlock.VolumeClaim) error {
	ctx, done := db.bound(ctx)
	defer done()
	var failed string
	err := db.inWriteTx(ctx, func(tx *sql.Tx) error {
		for _, c := range claims {
			failed = c.Volume
			if _, err := tx.ExecContext(ctx, `INSERT INTO volume_claims (tenant_id, volume, session_id, path, read_only, node_id, mounted_at)
				VALUES ($1, $2, $3, $4, $5, $6, $7)`, c.TenantID, c.Volume, c.SessionID, c.Path, c.ReadOnly, c.Node, nanos(c.MountedAt)); err != nil {
				return err
			}
		}
		return nil
	})
	switch {
	case err == nil:
		return nil
	case db.isForeignKey(err):
		return volumeNotFound(failed)
	case db.isUnique(err):
		return VolumeBusyProblem(failed)
	}
	var ae *airlock.Error
	if errors.As(err, &ae) {
		return err
	}
	return db.wrap(ctx, "claim volumes", err)
}

// ReleaseVolumes drops the session's claims.
func (db *DB) ReleaseVolumes(ctx context.Context, sessionID string) error {
	ctx, done := db.bound(ctx)
	defer done()
	_, err := db.write.ExecContext(ctx, `DELETE FROM volume_claims WHERE session_id = $1`, sessionID)
	return db.wrap(ctx, "release volumes", err)
}

// AllVolumeClaims returns every claim of the node ("" for all).
func (db *DB) AllVolumeClaims(ctx context.Context, node string) ([]airlock.VolumeClaim, error) {
	ctx, done := db.bound(ctx)
	defer done()
	rows, err := db.read.QueryContext(ctx, `SELECT tenant_id, volume, session_id, path, read_only, node_id, mounted_at FROM volume_claims
		WHERE $1 = '' OR node_id = $1 ORDER BY mounted_at, session_id`, node)
	if err != nil {
		return nil, db.wrap(ctx, "volume claims", err)
	}
	defer rows.Close()
	var out []airlock.VolumeClaim
	for rows.Next() {
		var c airlock.VolumeClaim
		var at int64
		if err := rows.Scan(&c.TenantID, &c.Volume, &c.SessionID, &c.Path, &c.ReadOnly, &c.Node, &at); err != nil {
			return nil, db.wrap(ctx, "volume claims", err)
		}
		c.MountedAt = fromNanos(at)
		out = append(out, c)
	}
	return out, db.wrap(ctx, "volume claims", rows.Err())
}
