package store

import (
	"context"
	"fmt"
	"strings"

	"github.com/airlockhq/airlock"
)

// DefaultAuditLimit and MaxAuditLimit bound a page of the audit log.
const (
	DefaultAuditLimit = 100
	MaxAuditLimit     = 1000
)

// RecordAudit appends e to the audit log; an empty ID gets a new ULID (so
// IDs sort by time) and a zero At the clock's time.
func (db *DB) RecordAudit(ctx context.Context, e *airlock.AuditEntry) error {
	if e.Action == "" || e.KeyID == "" {
		return airlock.Errorf(airlock.EINVALID, "audit entry needs an action and a key")
	}
	now := db.now()
	if e.ID == "" {
		e.ID = db.newID(now)
	}
	e.At = stamp(e.At, now)
	_, err := db.write.ExecContext(ctx,
		`INSERT INTO audit_log (id, at, key_id, key_name, role, tenant_id, action, target, status, result, detail)
		 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`,
		e.ID, nanos(e.At), e.KeyID, e.KeyName, string(e.Role), e.TenantID, e.Action, e.Target, e.Status, e.Result, e.Detail)
	return db.wrap(ctx, "record audit", err)
}

// ListAudit returns entries newest first.
func (db *DB) ListAudit(ctx context.Context, f airlock.AuditFilter) ([]*airlock.AuditEntry, error) {
	limit := f.Limit
	if limit <= 0 {
		limit = DefaultAuditLimit
	}
	limit = min(limit, MaxAuditLimit)
	var where []string
	var args []any
	if f.Before != "" {
		args = append(args, f.Before)
		where = append(where, fmt.Sprintf("id < $%d", len(args)))
	}
	if f.Action != "" {
		args = append(args, f.Action)
		where = append(where, fmt.Sprintf("action = $%d", len(args)))
	}
	q := `SELECT id, at, key_id, key_name, role, tenant_id, action, target, status, result, detail FROM audit_log`
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	args = append(args, limit)
	q += fmt.Sprintf(" ORDER BY id DESC LIMIT $%d", len(args))
	rows, err := db.read.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, db.wrap(ctx, "list audit", err)
	}
	defer rows.Close()
	out := []*airlock.AuditEntry{}
	for rows.Next() {
		var e airlock.AuditEntry
		var at int64
		if err := rows.Scan(&e.ID, &at, &e.KeyID, &e.KeyName, &e.Role, &e.TenantID, &e.Action, &e.Target, &e.Status, &e.Result, &e.Detail); err != nil {
			return nil, db.wrap(ctx, "list audit", err)
		}
		e.At = fromNanos(at)
		out = append(out, &e)
	}
	return out, db.wrap(ctx, "list audit", rows.Err())
}
