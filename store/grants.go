package store

import (
	"context"
	"database/sql"
	"sort"

	"github.com/airlockhq/airlock"
)

// BrokerGrants returns the broker scopes granted to the tenant, sorted.
func (db *DB) BrokerGrants(ctx context.Context, tenantID string) ([]string, error) {
	rows, err := db.read.QueryContext(ctx, `SELECT scope FROM broker_grants WHERE tenant_id = $1 ORDER BY scope`, tenantID)
	if err != nil {
		return nil, db.wrap(ctx, "broker grants", err)
	}
	defer rows.Close()
	out := []string{}
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return nil, db.wrap(ctx, "broker grants", err)
		}
		out = append(out, s)
	}
	return out, db.wrap(ctx, "broker grants", rows.Err())
}

// SetBrokerGrants replaces the tenant's grants at once.
func (db *DB) SetBrokerGrants(ctx context.Context, tenantID string, scopes []string) error {
	scopes = dedupe(scopes)
	return db.wrap(ctx, "set broker grants", db.inWriteTx(ctx, func(tx *sql.Tx) error {
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM tenants WHERE id = $1`, tenantID).Scan(&n); err != nil {
			return err
		}
		if n == 0 {
			return tenantNotFound(tenantID)
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM broker_grants WHERE tenant_id = $1`, tenantID); err != nil {
			return err
		}
		for _, s := range scopes {
			if s == "" {
				return airlock.Errorf(airlock.EINVALID, "a broker scope must not be empty")
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO broker_grants (tenant_id, scope) VALUES ($1, $2)`, tenantID, s); err != nil {
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
