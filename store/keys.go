package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/airlockhq/airlock"
)

// CreateAPIKey stores k (its hash, never a secret). An empty ID gets a new
// ULID, a zero CreatedAt the clock's time and an empty Role RoleTenant;
// all are written back to k. A tenant key needs a tenant and an operator
// key must have none (EINVALID); an unknown tenant is ENOTFOUND; a hash
// already stored is ECONFLICT.
func (db *DB) CreateAPIKey(ctx context.Context, k *airlock.APIKey) error {
	role := k.Role
	if role == "" {
		role = airlock.RoleTenant
	}
	switch {
	case !role.Valid():
		return airlock.Errorf(airlock.EINVALID, "unknown key role %q", role)
	case role == airlock.RoleTenant && k.TenantID == "":
		return airlock.Errorf(airlock.EINVALID, "api key tenant is required")
	case role == airlock.RoleAdmin && k.TenantID != "":
		return airlock.Errorf(airlock.EINVALID, "an admin key belongs to no tenant")
	case k.Hash == "":
		return airlock.Errorf(airlock.EINVALID, "api key hash is required")
	}
	if err := airlock.ValidateKeyName(k.Name); err != nil {
		return err
	}
	now := db.now()
	id := k.ID
	if id == "" {
		id = db.newID(now)
	}
	created := stamp(k.CreatedAt, now)
	_, err := db.write.ExecContext(ctx,
		`INSERT INTO api_keys (id, tenant_id, hash, prefix, created_at, name, role, expires_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
		id, nullString(k.TenantID), k.Hash, k.Prefix, nanos(created), k.Name, string(role), nullTime(k.ExpiresAt))
	switch {
	case db.isForeignKey(err):
		return tenantNotFound(k.TenantID)
	case db.isUnique(err):
		return airlock.Errorf(airlock.ECONFLICT, "api key exists")
	case err != nil:
		return db.wrap(ctx, "create api key", err)
	}
	k.ID, k.CreatedAt, k.Role = id, created, role
	return nil
}

const keyColumns = `id, coalesce(tenant_id, ''), name, role, hash, prefix, created_at, expires_at, revoked_at, last_used_at`

func scanKey(row interface{ Scan(...any) error }) (*airlock.APIKey, error) {
	var k airlock.APIKey
	var created int64
	var expires, revoked, used sql.NullInt64
	if err := row.Scan(&k.ID, &k.TenantID, &k.Name, &k.Role, &k.Hash, &k.Prefix, &created, &expires, &revoked, &used); err != nil {
		return nil, err
	}
	k.CreatedAt = fromNanos(created)
	k.ExpiresAt, k.RevokedAt, k.LastUsedAt = timePtr(expires), timePtr(revoked), timePtr(used)
	return &k, nil
}

func (db *DB) queryKey(ctx context.Context, what, where string, arg any) (*airlock.APIKey, error) {
	k, err := scanKey(db.read.QueryRowContext(ctx, `SELECT `+keyColumns+` FROM api_keys WHERE `+where, arg))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("%s: %w", what, airlock.ErrNotFound)
	}
	if err != nil {
		return nil, db.wrap(ctx, "get api key", err)
	}
	return k, nil
}

// APIKeyByHash returns the key with the hash, whatever its state.
func (db *DB) APIKeyByHash(ctx context.Context, hash string) (*airlock.APIKey, error) {
	// The hash is a credential's digest: keep it out of the message.
	return db.queryKey(ctx, "api key", `hash = $1`, hash)
}

// APIKey returns the key with the ID, whatever its state.
func (db *DB) APIKey(ctx context.Context, id string) (*airlock.APIKey, error) {
	return db.queryKey(ctx, fmt.Sprintf("api key %q", id), `id = $1`, id)
}

// ListAPIKeys returns the keys of one tenant, or the operator's keys
// (Role RoleAdmin, no tenant), oldest first.
func (db *DB) ListAPIKeys(ctx context.Context, f airlock.KeyFilter) ([]*airlock.APIKey, error) {
	q := `SELECT ` + keyColumns + ` FROM api_keys WHERE tenant_id = $1 ORDER BY created_at, id`
	arg := any(f.TenantID)
	if f.TenantID == "" {
		if f.Role != airlock.RoleAdmin {
			return nil, airlock.Errorf(airlock.EINVALID, "list keys: a tenant or the admin role is required")
		}
		q = `SELECT ` + keyColumns + ` FROM api_keys WHERE role = $1 ORDER BY created_at, id`
		arg = string(airlock.RoleAdmin)
	}
	rows, err := db.read.QueryContext(ctx, q, arg)
	if err != nil {
		return nil, db.wrap(ctx, "list api keys", err)
	}
	defer rows.Close()
	keys := []*airlock.APIKey{}
	for rows.Next() {
		k, err := scanKey(rows)
		if err != nil {
			return nil, db.wrap(ctx, "list api keys", err)
		}
		keys = append(keys, k)
	}
	return keys, db.wrap(ctx, "list api keys", rows.Err())
}

// RevokeAPIKey marks the key revoked now (a revoked key keeps its first
// time) and returns it.
func (db *DB) RevokeAPIKey(ctx context.Context, id string) (*airlock.APIKey, error) {
	if _, err := db.write.ExecContext(ctx,
		`UPDATE api_keys SET revoked_at = $1 WHERE id = $2 AND revoked_at IS NULL`, nanos(db.now()), id); err != nil {
		return nil, db.wrap(ctx, "revoke api key", err)
	}
	k, err := scanKey(db.write.QueryRowContext(ctx, `SELECT `+keyColumns+` FROM api_keys WHERE id = $1`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("api key %q: %w", id, airlock.ErrNotFound)
	}
	return k, db.wrap(ctx, "revoke api key", err)
}

// TouchAPIKey records the key's last use (never moving it back).
func (db *DB) TouchAPIKey(ctx context.Context, id string, at time.Time) error {
	_, err := db.write.ExecContext(ctx,
		`UPDATE api_keys SET last_used_at = $1 WHERE id = $2 AND (last_used_at IS NULL OR last_used_at < $3)`,
		nanos(at), id, nanos(at))
	return db.wrap(ctx, "touch api key", err)
}

func nullString(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func nullTime(t *time.Time) any {
	if t == nil {
		return nil
	}
	return nanos(*t)
}

func timePtr(n sql.NullInt64) *time.Time {
	if !n.Valid {
		return nil
	}
	t := fromNanos(n.Int64)
	return &t
}
