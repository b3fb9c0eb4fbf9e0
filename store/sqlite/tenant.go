package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/airlockhq/airlock"
)

// CreateTenant stores t. An empty ID gets a new ULID and a zero CreatedAt the
// clock's time; both are written back to t. A taken name is ECONFLICT.
func (db *DB) CreateTenant(ctx context.Context, t *airlock.Tenant) error {
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
		`INSERT INTO tenants (id, name, first_party, created_at, guard, isolation) VALUES (?, ?, ?, ?, ?, ?)`,
		id, t.Name, t.FirstParty, nanos(created), string(t.Guard), string(t.Isolation))
	switch {
	case isUnique(err) && strings.Contains(err.Error(), "tenants.name"):
		return airlock.Errorf(airlock.ECONFLICT, "tenant %q exists", t.Name)
	case isUnique(err):
		return airlock.Errorf(airlock.ECONFLICT, "tenant id %q exists", id)
	case err != nil:
		return wrap("create tenant", err)
	}
	t.ID, t.CreatedAt = id, created
	return nil
}

const tenantColumns = `t.id, t.name, t.first_party, t.created_at, t.guard, t.isolation`

func scanTenant(row interface{ Scan(...any) error }) (*airlock.Tenant, error) {
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
		return nil, wrap("get tenant", err)
	}
	return t, nil
}

// TenantByName returns the tenant with the name, or ErrNotFound.
func (db *DB) TenantByName(ctx context.Context, name string) (*airlock.Tenant, error) {
	return db.queryTenant(ctx, fmt.Sprintf("tenant %q", name),
		`SELECT `+tenantColumns+` FROM tenants t WHERE t.name = ?`, name)
}

// TenantByID returns the tenant with the ID, or ErrNotFound.
func (db *DB) TenantByID(ctx context.Context, id string) (*airlock.Tenant, error) {
	return db.queryTenant(ctx, fmt.Sprintf("tenant %s", id),
		`SELECT `+tenantColumns+` FROM tenants t WHERE t.id = ?`, id)
}

// ListTenants returns every tenant, oldest first.
func (db *DB) ListTenants(ctx context.Context) ([]*airlock.Tenant, error) {
	rows, err := db.read.QueryContext(ctx,
		`SELECT `+tenantColumns+` FROM tenants t ORDER BY t.created_at, t.id`)
	if err != nil {
		return nil, wrap("list tenants", err)
	}
	defer rows.Close()
	var ts []*airlock.Tenant
	for rows.Next() {
		t, err := scanTenant(rows)
		if err != nil {
			return nil, wrap("list tenants", err)
		}
		ts = append(ts, t)
	}
	return ts, wrap("list tenants", rows.Err())
}

// CountTenants returns how many tenants there are.
func (db *DB) CountTenants(ctx context.Context) (int, error) {
	var n int
	err := db.read.QueryRowContext(ctx, `SELECT count(*) FROM tenants`).Scan(&n)
	return n, wrap("count tenants", err)
}

func tenantNotFound(id string) error {
	return fmt.Errorf("tenant %s: %w", id, airlock.ErrNotFound)
}
