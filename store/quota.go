package store

import (
	"context"

	"database/sql"

	"github.com/airlockhq/airlock"
)

var (
	_ airlock.QuotaStore       = (*DB)(nil)
	_ airlock.ExecutionCounter = (*DB)(nil)
)

// TenantQuotas returns every tenant's quota overrides.
func (db *DB) TenantQuotas(ctx context.Context) (map[string]map[string]int64, error) {
	ctx, done := db.bound(ctx)
	defer done()
	rows, err := db.read.QueryContext(ctx, `SELECT tenant_id, quota, limit_val FROM tenant_quotas`)
	if err != nil {
		return nil, db.wrap(ctx, "list tenant quotas", err)
	}
	defer rows.Close()
	out := map[string]map[string]int64{}
	for rows.Next() {
		var tenant, quota string
		var limit int64
		if err := rows.Scan(&tenant, &quota, &limit); err != nil {
			return nil, db.wrap(ctx, "list tenant quotas", err)
		}
		if out[tenant] == nil {
			out[tenant] = map[string]int64{}
		}
		out[tenant][quota] = limit
	}
	return out, db.wrap(ctx, "list tenant quotas", rows.Err())
}

// SetTenantQuota sets one override of a tenant.
func (db *DB) SetTenantQuota(ctx context.Context, tenantID, quota string, limit int64) error {
	ctx, done := db.bound(ctx)
	defer done()
	if quota == "" || limit < -1 {
		return airlock.Errorf(airlock.EINVALID, "a quota needs a name and a limit of -1 (none) or more")
	}
	_, err := db.write.ExecContext(ctx, `INSERT INTO tenant_quotas (tenant_id, quota, limit_val, updated_at)
		VALUES ($1, $2, $3, $4)
		ON CONFLICT (tenant_id, quota) DO UPDATE SET limit_val = excluded.limit_val, updated_at = excluded.updated_at`,
		tenantID, quota, limit, nanos(db.now()))
	if db.isForeignKey(err) {
		return tenantNotFound(tenantID)
	}
	return db.wrap(ctx, "set tenant quota", err)
}

// DeleteTenantQuota drops one override of a tenant.
func (db *DB) DeleteTenantQuota(ctx context.Context, tenantID, quota string) error {
	ctx, done := db.bound(ctx)
	defer done()
	_, err := db.write.ExecContext(ctx, `DELETE FROM tenant_quotas WHERE tenant_id = $1 AND quota = $2`, tenantID, quota)
	return db.wrap(ctx, "delete tenant quota", err)
}

// AddUsage adds to the daily counters in one transaction. Deltas of a
// tenant that no longer exists are dropped (its counters went with it).
func (db *DB) AddUsage(ctx context.Context, deltas []airlock.UsageDelta) error {
	ctx, done := db.bound(ctx)
	defer done()
	if len(deltas) == 0 {
		return nil
	}
	for _, d := range deltas {
		if d.TenantID == "" || d.Day == "" || d.SandboxMillis < 0 || d.EgressBytes < 0 {
			return airlock.Errorf(airlock.EINVALID, "a usage delta needs a tenant, a day and counts of 0 or more")
		}
	}
	now := nanos(db.now())
	err := db.inWriteTx(ctx, func(tx *sql.Tx) error {
		for _, d := range deltas {
			_, err := tx.ExecContext(ctx, `INSERT INTO tenant_usage (tenant_id, day, sandbox_ms, egress_bytes, updated_at)
				SELECT CAST($1 AS TEXT), CAST($2 AS TEXT), CAST($3 AS BIGINT), CAST($4 AS BIGINT), CAST($5 AS BIGINT)
				WHERE EXISTS (SELECT 1 FROM tenants WHERE id = $1)
				ON CONFLICT (tenant_id, day) DO UPDATE SET
					sandbox_ms = tenant_usage.sandbox_ms + excluded.sandbox_ms,
					egress_bytes = tenant_usage.egress_bytes + excluded.egress_bytes,
					updated_at = excluded.updated_at`,
				d.TenantID, d.Day, d.SandboxMillis, d.EgressBytes, now)
			if err != nil {
				return err
			}
		}
		return nil
	})
	return db.wrap(ctx, "add usage", err)
}

// DailyUsage returns each tenant's counters of one day.
func (db *DB) DailyUsage(ctx context.Context, day string) (map[string]airlock.DailyUsage, error) {
	ctx, done := db.bound(ctx)
	defer done()
	rows, err := db.read.QueryContext(ctx, `SELECT tenant_id, sandbox_ms, egress_bytes FROM tenant_usage WHERE day = $1`, day)
	if err != nil {
		return nil, db.wrap(ctx, "daily usage", err)
	}
	defer rows.Close()
	out := map[string]airlock.DailyUsage{}
	for rows.Next() {
		var tenant string
		var u airlock.DailyUsage
		if err := rows.Scan(&tenant, &u.SandboxMillis, &u.EgressBytes); err != nil {
			return nil, db.wrap(ctx, "daily usage", err)
		}
		out[tenant] = u
	}
	return out, db.wrap(ctx, "daily usage", rows.Err())
}
