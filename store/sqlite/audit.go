package sqlite

import (
	"context"
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
		 VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		e.ID, nanos(e.At), e.KeyID, e.KeyName, string(e.Role), e.TenantID, e.Action, e.Target, e.Status, e.Result, e.Detail)
	return wrap("record audit", err)
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
		where, args = append(where, "id < ?"), append(args, f.Before)
	}
	if f.Action != "" {
		where, args = append(where, "action = ?"), append(args, f.Action)
	}
	q := `SELECT id, at, key_id, key_name, role, tenant_id, action, target, status, result, detail FROM audit_log`
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	q += " ORDER BY id DESC LIMIT ?"
	args = append(args, limit)
	rows, err := db.read.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, wrap("list audit", err)
	}
	defer rows.Close()
	out := []*airlock.AuditEntry{}
	for rows.Next() {
		var e airlock.AuditEntry
		var at int64
		if err := rows.Scan(&e.ID, &at, &e.KeyID, &e.KeyName, &e.Role, &e.TenantID, &e.Action, &e.Target, &e.Status, &e.Result, &e.Detail); err != nil {
			return nil, wrap("list audit", err)
		}
		e.At = fromNanos(at)
		out = append(out, &e)
	}
	return out, wrap("list audit", rows.Err())
}
