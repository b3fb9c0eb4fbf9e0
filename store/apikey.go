package store

import (
	"context"
	"errors"
	"fmt"

	"database/sql"

	"github.com/airlockhq/airlock"
)

// TenantByKeyHash returns the tenant that owns the usable tenant key
// (not revoked, not expired) with the hash, or ErrNotFound.
func (db *DB) TenantByKeyHash(ctx context.Context, hash string) (*airlock.Tenant, error) {
	ctx, done := db.bound(ctx)
	defer done()
	t, err := scanTenant(db.read.QueryRowContext(ctx,
		`SELECT `+tenantColumns+` FROM api_keys k JOIN tenants t ON t.id = k.tenant_id
		 WHERE k.hash = $1 AND k.role = 'tenant' AND k.revoked_at IS NULL AND (k.expires_at IS NULL OR k.expires_at > $2)`,
		hash, nanos(db.now())))
	if errors.Is(err, sql.ErrNoRows) {
		// The hash is a credential's digest: keep it out of the message.
		return nil, fmt.Errorf("api key: %w", airlock.ErrNotFound)
	}
	if err != nil {
		return nil, db.wrap(ctx, "tenant by key", err)
	}
	return t, nil
}
