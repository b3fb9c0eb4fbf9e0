package store

import (
	"context"
	"errors"
	"fmt"

	"database/sql"

	"github.com/airlockhq/airlock"
)

// CreateAPIKey stores k (its hash, never a secret). An empty ID gets a new
// ULID and a zero CreatedAt the clock's time; both are written back to k.
// An unknown tenant is ENOTFOUND; a hash already stored is ECONFLICT.
func (db *DB) CreateAPIKey(ctx context.Context, k *airlock.APIKey) error {
	ctx, done := db.bound(ctx)
	defer done()
	switch {
	case k.TenantID == "":
		return airlock.Errorf(airlock.EINVALID, "api key tenant is required")
	case k.Hash == "":
		return airlock.Errorf(airlock.EINVALID, "api key hash is required")
	}
	now := db.now()
	id := k.ID
	if id == "" {
		id = db.newID(now)
	}
	created := stamp(k.CreatedAt, now)
	_, err := db.write.ExecContext(ctx,
		`INSERT INTO api_keys (id, tenant_id, hash, prefix, created_at) VALUES ($1, $2, $3, $4, $5)`,
		id, k.TenantID, k.Hash, k.Prefix, nanos(created))
	switch {
	case db.isForeignKey(err):
		return tenantNotFound(k.TenantID)
	case db.isUnique(err):
		return airlock.Errorf(airlock.ECONFLICT, "api key exists")
	case err != nil:
		return db.wrap(ctx, "create api key", err)
	}
	k.ID, k.CreatedAt = id, created
	return nil
}

// TenantByKeyHash returns the tenant that owns the key with the hash, or
// ErrNotFound.
func (db *DB) TenantByKeyHash(ctx context.Context, hash string) (*airlock.Tenant, error) {
	ctx, done := db.bound(ctx)
	defer done()
	t, err := scanTenant(db.read.QueryRowContext(ctx,
		`SELECT `+tenantColumns+` FROM api_keys k JOIN tenants t ON t.id = k.tenant_id WHERE k.hash = $1`,
		hash))
	if errors.Is(err, sql.ErrNoRows) {
		// The hash is a credential's digest: keep it out of the message.
		return nil, fmt.Errorf("api key: %w", airlock.ErrNotFound)
	}
	if err != nil {
		return nil, db.wrap(ctx, "tenant by key", err)
	}
	return t, nil
}
