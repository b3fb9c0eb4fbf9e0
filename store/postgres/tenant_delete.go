package postgres

import "context"

// DeleteTenant removes the tenant; every record of it goes with it (the
// schema's foreign keys cascade).
func (db *DB) DeleteTenant(ctx context.Context, tenantID string) error {
	ctx, done := db.bound(ctx)
	defer done()
	tag, err := db.pool.Exec(ctx, `DELETE FROM tenants WHERE id = $1`, tenantID)
	if err != nil {
		return wrap(ctx, "delete tenant", err)
	}
	if tag.RowsAffected() == 0 {
		return tenantNotFound(tenantID)
	}
	return nil
}
