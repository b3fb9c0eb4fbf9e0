package sqlite

import (
	"context"
	"encoding/json"

	"github.com/airlockhq/airlock"
)

// encodeFindings stores guard findings as a JSON array.
func encodeFindings(f []airlock.GuardFinding) string {
	if len(f) == 0 {
		return "[]"
	}
	b, err := json.Marshal(f)
	if err != nil {
		return "[]"
	}
	return string(b)
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
	if _, err := airlock.ParseGuardPolicy(string(p)); err != nil {
		return err
	}
	res, err := db.write.ExecContext(ctx, `UPDATE tenants SET guard = ? WHERE id = ?`, string(p), tenantID)
	if err != nil {
		return wrap("set tenant guard", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return wrap("set tenant guard", err)
	}
	if n == 0 {
		return tenantNotFound(tenantID)
	}
	return nil
}
