package sqlite

import (
	"context"

	"github.com/airlockhq/airlock"
)

// SetTenantFirstParty marks the tenant first-party or not; ErrNotFound if
// there is no such tenant.
func (db *DB) SetTenantFirstParty(ctx context.Context, tenantID string, firstParty bool) error {
	res, err := db.write.ExecContext(ctx, `UPDATE tenants SET first_party = ? WHERE id = ?`, firstParty, tenantID)
	if err != nil {
		return wrap("set tenant first-party", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return wrap("set tenant first-party", err)
	}
	if n == 0 {
		return tenantNotFound(tenantID)
	}
	return nil
}

// SetTenantIsolation sets the operator's isolation floor of the tenant
// ("" for none: the floor its first-party mark gives); EINVALID for an
// unknown level, ErrNotFound if there is no such tenant.
func (db *DB) SetTenantIsolation(ctx context.Context, tenantID string, i airlock.Isolation) error {
	if i != "" && !i.Valid() {
		return airlock.Errorf(airlock.EINVALID, "unknown isolation %q", i)
	}
	res, err := db.write.ExecContext(ctx, `UPDATE tenants SET isolation = ? WHERE id = ?`, string(i), tenantID)
	if err != nil {
		return wrap("set tenant isolation", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return wrap("set tenant isolation", err)
	}
	if n == 0 {
		return tenantNotFound(tenantID)
	}
	return nil
}
