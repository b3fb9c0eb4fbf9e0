package postgres

import (
	"context"
	"sort"

	"github.com/jackc/pgx/v5"

	"github.com/airlockhq/airlock"
)

// BrokerGrants returns the broker scopes granted to the tenant, sorted.
func (db *DB) BrokerGrants(ctx context.Context, tenantID string) ([]string, error) {
	ctx, done := db.bound(ctx)
	defer done()
	rows, err := db.pool.Query(ctx, `SELECT scope FROM broker_grants WHERE tenant_id = $1 ORDER BY scope`, tenantID)
	if err != nil {
		return nil, wrap(ctx, "broker grants", err)
	}
	defer rows.Close()
	out := []string{}
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return nil, wrap(ctx, "broker grants", err)
		}
		out = append(out, s)
	}
	return out, wrap(ctx, "broker grants", rows.Err())
}

// SetBrokerGrants replaces the tenant's grants at once.
func (db *DB) SetBrokerGrants(ctx context.Context, tenantID string, scopes []string) error {
	ctx, done := db.bound(ctx)
	defer done()
	scopes = dedupe(scopes)
	return wrap(ctx, "set broker grants", db.inTx(ctx, func(tx pgx.Tx) error {
		var n int
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM (SELECT 1 FROM tenants WHERE id = $1 FOR UPDATE) t`, tenantID).Scan(&n); err != nil {
			return err
		}
		if n == 0 {
			return tenantNotFound(tenantID)
		}
		if _, err := tx.Exec(ctx, `DELETE FROM broker_grants WHERE tenant_id = $1`, tenantID); err != nil {
			return err
		}
		for _, s := range scopes {
			if s == "" {
				return airlock.Errorf(airlock.EINVALID, "a broker scope must not be empty")
			}
			if _, err := tx.Exec(ctx, `INSERT INTO broker_grants (tenant_id, scope) VALUES ($1, $2)`, tenantID, s); err != nil {
				return err
			}
		}
		return nil
	}))
}

func dedupe(s []string) []string {
	out := append([]string(nil), s...)
	sort.Strings(out)
	j := 0
	for i, v := range out {
		if i == 0 || v != out[j-1] {
			out[j] = v
			j++
		}
	}
	return out[:j]
}
