package sqlite

import "context"

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
