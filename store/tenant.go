package store

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"database/sql"

	"github.com/airlockhq/airlock"
)

// CreateTenant stores t. An empty ID gets a new ULID and a zero CreatedAt the
// clock's time; both are written back to t. A taken name is ECONFLICT.
func (db *DB) CreateTenant(ctx context.Context, t *airlock.Tenant) error {
	ctx, done := db.bound(ctx)
	defer done()
	if strings.TrimSpace(t.Name) == "" {
		return airlock.Errorf(airlock.EINVALID, "tenant name is required")
	}
	if t.Isolation != "" && !t.Isolation.Valid() {
		return airlock.Errorf(airlock.EINVALID, "unknown isolation %q", t.Isolation)
	}
	now := db.now()
	id := t.ID
	if id == "" {
		id = db.newID(now)
	}
	created := stamp(t.CreatedAt, now)
	_, err := db.write.ExecContext(ctx,
		`INSERT INTO tenants (id, name, first_party, created_at, guard, isolation) VALUES ($1, $2, $3, $4, $5, $6)`,
		id, t.Name, t.FirstParty, nanos(created), string(t.Guard), string(t.Isolation))
	switch {
	case db.d.IsUnique(err, "tenants.name"):
		return airlock.Errorf(airlock.ECONFLICT, "tenant %q exists", t.Name)
	case db.isUnique(err):
		return airlock.Errorf(airlock.ECONFLICT, "tenant id %q exists", id)
	case err != nil:
		return db.wrap(ctx, "create tenant", err)
	}
	t.ID, t.CreatedAt = id, created
	return nil
}

const tenantColumns = `t.id, t.name, t.first_party, t.created_at, t.guard, t.isolation`

func scanTenant(row scanner) (*airlock.Tenant, error) {
	var t airlock.Tenant
	var created int64
	if err := row.Scan(&t.ID, &t.Name, &t.FirstParty, &created, &t.Guard, &t.Isolation); err != nil {
		return nil, err
	}
	t.CreatedAt = fromNanos(created)
	return &t, nil
}

// queryTenant runs a query for at most one tenant; what names the tenant in
// the not-found error.
func (db *DB) queryTenant(ctx context.Context, what, query string, args ...any) (*airlock.Tenant, error) {
	t, err := scanTenant(db.read.QueryRowContext(ctx, query, args...))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("%s: %w", what, airlock.ErrNotFound)
	}
	if err != nil {
		return nil, db.wrap(ctx, "get tenant", err)
	}
	return t, nil
}

// TenantByName returns the tenant with the name, or ErrNotFound.
func (db *DB) TenantByName(ctx context.Context, name string) (*airlock.Tenant, error) {
	ctx, done := db.bound(ctx)
	defer done()
	return db.queryTenant(ctx, fmt.Sprintf("tenant %q", name),
		`SELECT `+tenantColumns+` FROM tenants t WHERE t.name = $1`, name)
}

// TenantByID returns the tenant with the ID, or ErrNotFound.
func (db *DB) TenantByID(ctx context.Context, id string) (*airlock.Tenant, error) {
	ctx, done := db.bound(ctx)
	defer done()
	return db.queryTenant(ctx, fmt.Sprintf("tenant %s", id),
		`SELECT `+tenantColumns+` FROM tenants t WHERE t.id = $1`, id)
}

// ListTenants returns every tenant, oldest first.
func (db *DB) ListTenants(ctx context.Context) ([]*airlock.Tenant, error) {
	ctx, done := db.bound(ctx)
	defer done()
	rows, err := db.read.QueryContext(ctx,
		`SELECT `+tenantColumns+` FROM tenants t ORDER BY t.created_at, t.id`)
	if err != nil {
		return nil, db.wrap(ctx, "list tenants", err)
	}
	defer rows.Close()
	var ts []*airlock.Tenant
	for rows.Next() {
		t, err := scanTenant(rows)
		if err != nil {
			return nil, db.wrap(ctx, "list tenants", err)
		}
		ts = append(ts, t)
	}
	return ts, db.wrap(ctx, "list tenants", rows.Err())
}

// CountTenants returns how many tenants there are.
func (db *DB) CountTenants(ctx context.Context) (int, error) {
	ctx, done := db.bound(ctx)
	defer done()
	var n int
	err := db.read.QueryRowContext(ctx, `SELECT count(*) FROM tenants`).Scan(&n)
	return n, db.wrap(ctx, "count tenants", err)
}

// SetTenantFirstParty marks the tenant first-party or not; ErrNotFound if
// there is no such tenant.
func (db *DB) SetTenantFirstParty(ctx context.Context, tenantID string, firstParty bool) error {
	ctx, done := db.bound(ctx)
	defer done()
	res, err := db.write.ExecContext(ctx, `UPDATE tenants SET first_party = $1 WHERE id = $2`, firstParty, tenantID)
	if err != nil {
		return db.wrap(ctx, "set tenant first-party", err)
	}
	if affected(res) == 0 {
		return tenantNotFound(tenantID)
	}
	return nil
}

// SetTenantIsolation sets the operator's isolation floor of the tenant
// ("" for none); EINVALID for an unknown level, ErrNotFound if there is
// no such tenant.
func (db *DB) SetTenantIsolation(ctx context.Context, tenantID string, i airlock.Isolation) error {
	if i != "" && !i.Valid() {
		return airlock.Errorf(airlock.EINVALID, "unknown isolation %q", i)
	}
	ctx, done := db.bound(ctx)
	defer done()
	res, err := db.write.ExecContext(ctx, `UPDATE tenants SET isolation = $1 WHERE id = $2`, string(i), tenantID)
	if err != nil {
		return db.wrap(ctx, "set tenant isolation", err)
	}
	if affected(res) == 0 {
		return tenantNotFound(tenantID)
	}
	return nil
}

func tenantNotFound(id string) error {
	return fmt.Errorf("tenant %s: %w", id, airlock.ErrNotFound)
}
