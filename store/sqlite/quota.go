package sqlite

import (
	"context"
	"database/sql"
	"time"

	"github.com/airlockhq/airlock"
)

var _ airlock.QuotaStore = (*DB)(nil)

// TenantQuotas returns every tenant's quota overrides.
func (db *DB) TenantQuotas(ctx context.Context) (map[string]map[string]int64, error) {
	rows, err := db.read.QueryContext(ctx, `SELECT tenant_id, quota, limit_val FROM tenant_quotas`)
	if err != nil {
		return nil, wrap("list tenant quotas", err)
	}
	defer rows.Close()
	out := map[string]map[string]int64{}
	for rows.Next() {
		var tenant, quota string
		var limit int64
		if err := rows.Scan(&tenant, &quota, &limit); err != nil {
			return nil, wrap("list tenant quotas", err)
		}
		if out[tenant] == nil {
			out[tenant] = map[string]int64{}
		}
		out[tenant][quota] = limit
	}
	return out, wrap("list tenant quotas", rows.Err())
}

// SetTenantQuota sets one override of a tenant.
func (db *DB) SetTenantQuota(ctx context.Context, tenantID, quota string, limit int64) error {
	if quota == "" || limit < -1 {
		return airlock.Errorf(airlock.EINVALID, "a quota needs a name and a limit of -1 (none) or more")
	}
	_, err := db.write.ExecContext(ctx, `INSERT INTO tenant_quotas (tenant_id, quota, limit_val, updated_at)
		VALUES (?, ?, ?, ?)
		ON CONFLICT (tenant_id, quota) DO UPDATE SET limit_val = excluded.limit_val, updated_at = excluded.updated_at`,
		tenantID, quota, limit, nanos(db.now()))
	if isForeignKey(err) {
		return tenantNotFound(tenantID)
	}
	return wrap("set tenant quota", err)
}

// DeleteTenantQuota drops one override of a tenant.
func (db *DB) DeleteTenantQuota(ctx context.Context, tenantID, quota string) error {
	_, err := db.write.ExecContext(ctx, `DELETE FROM tenant_quotas WHERE tenant_id = ? AND quota = ?`, tenantID, quota)
	return wrap("delete tenant quota", err)
}

// AddUsage adds to the daily counters in one transaction. Deltas of a
// tenant that no longer exists are dropped (its counters went with it).
func (db *DB) AddUsage(ctx context.Context, deltas []airlock.UsageDelta) error {
	if len(deltas) == 0 {
		return nil
	}
	now := nanos(db.now())
	err := db.inWriteTx(ctx, func(tx *sql.Tx) error {
		st, err := tx.PrepareContext(ctx, `INSERT INTO tenant_usage (tenant_id, day, sandbox_ms, egress_bytes, updated_at)
			SELECT ?, ?, ?, ?, ? WHERE EXISTS (SELECT 1 FROM tenants WHERE id = ?)
			ON CONFLICT (tenant_id, day) DO UPDATE SET
				sandbox_ms = sandbox_ms + excluded.sandbox_ms,
				egress_bytes = egress_bytes + excluded.egress_bytes,
				updated_at = excluded.updated_at`)
		if err != nil {
			return err
		}
		defer st.Close()
		for _, d := range deltas {
			if d.TenantID == "" || d.Day == "" || d.SandboxMillis < 0 || d.EgressBytes < 0 {
				return airlock.Errorf(airlock.EINVALID, "a usage delta needs a tenant, a day and counts of 0 or more")
			}
			if _, err := st.ExecContext(ctx, d.TenantID, d.Day, d.SandboxMillis, d.EgressBytes, now, d.TenantID); err != nil {
				return err
			}
		}
		return nil
	})
	if airlock.ErrorCode(err) == airlock.EINVALID {
		return err
	}
	return wrap("add usage", err)
}

// DailyUsage returns each tenant's counters of one day.
func (db *DB) DailyUsage(ctx context.Context, day string) (map[string]airlock.DailyUsage, error) {
	rows, err := db.read.QueryContext(ctx, `SELECT tenant_id, sandbox_ms, egress_bytes FROM tenant_usage WHERE day = ?`, day)
	if err != nil {
		return nil, wrap("daily usage", err)
	}
	defer rows.Close()
	out := map[string]airlock.DailyUsage{}
	for rows.Next() {
		var tenant string
		var u airlock.DailyUsage
		if err := rows.Scan(&tenant, &u.SandboxMillis, &u.EgressBytes); err != nil {
			return nil, wrap("daily usage", err)
		}
		out[tenant] = u
	}
	return out, wrap("daily usage", rows.Err())
}

// ExecutionCounts are one tenant's executions as the store has them.
type ExecutionCounts = airlock.ExecutionCounts

var _ airlock.ExecutionCounter = (*DB)(nil)

// ExecutionCounts returns, by tenant, the one-shot executions recorded
// as running and the executions recorded since the time; tenants with
// neither are left out.
func (db *DB) ExecutionCounts(ctx context.Context, since time.Time) (map[string]ExecutionCounts, error) {
	rows, err := db.read.QueryContext(ctx, `SELECT tenant_id,
			SUM(status = 'running' AND session_id = ''), SUM(created_at >= ?)
		FROM executions WHERE (status = 'running' AND session_id = '') OR created_at >= ?
		GROUP BY tenant_id`, nanos(since), nanos(since))
	if err != nil {
		return nil, wrap("count executions", err)
	}
	defer rows.Close()
	out := map[string]ExecutionCounts{}
	for rows.Next() {
		var tenant string
		var c ExecutionCounts
		if err := rows.Scan(&tenant, &c.RunningOneShot, &c.Since); err != nil {
			return nil, wrap("count executions", err)
		}
		out[tenant] = c
	}
	return out, wrap("count executions", rows.Err())
}
