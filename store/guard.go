package store

import (
	"context"
	"encoding/json"

	"github.com/airlockhq/airlock"
)

// encodeFindings stores guard findings as a JSON array.
func (db *DB) encodeFindings(f []airlock.GuardFinding) string {
	if len(f) == 0 {
		return "[]"
	}
	b, err := json.Marshal(f)
	if err != nil {
		return "[]"
	}
	return db.json(b)
}

// decodeFindings reads what encodeFindings wrote; never nil.
func decodeFindings(s string) []airlock.GuardFinding {
	var f []airlock.GuardFinding
	if json.Unmarshal([]byte(s), &f) != nil || f == nil {
		return []airlock.GuardFinding{}
	}
	return f
}

// SetTenantGuard sets the tenant's guard policy; ErrNotFound if there is
// no such tenant.
func (db *DB) SetTenantGuard(ctx context.Context, tenantID string, p airlock.GuardPolicy) error {
	ctx, done := db.bound(ctx)
	defer done()
	if _, err := airlock.ParseGuardPolicy(string(p)); err != nil {
		return err
	}
	res, err := db.write.ExecContext(ctx, `UPDATE tenants SET guard = $1 WHERE id = $2`, string(p), tenantID)
	if err != nil {
		return db.wrap(ctx, "set tenant guard", err)
	}
	if affected(res) == 0 {
		return tenantNotFound(tenantID)
	}
	return nil
}
