package store

import "context"

// DeleteTenant removes the tenant; every record of it goes with it (the
// schema's foreign keys cascade).
func (db *DB) DeleteTenant(ctx context.Context, tenantID string) error {
	res, err := db.write.ExecContext(ctx, `DELETE FROM tenants WHERE id = $1`, tenantID)
	if err != nil {
		return db.wrap(ctx, "delete tenant", err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return db.wrap(ctx, "delete tenant", err)
	} else if n == 0 {
		return tenantNotFound(tenantID)
	}
	return nil
}
