package sqlite

import (
	"context"
	"database/sql"
	"strings"

	"github.com/airlockhq/airlock"
)

var _ airlock.EgressStore = (*DB)(nil)

// maxEgressText bounds each text column of an event: the values come from
// what a sandbox sent.
const maxEgressText = 1024

func clipText(s string) string {
	if len(s) > maxEgressText {
		return s[:maxEgressText]
	}
	return s
}

// RecordEgress appends events in one transaction and writes their Seq
// back.
func (db *DB) RecordEgress(ctx context.Context, events []*airlock.EgressEvent) error {
	if len(events) == 0 {
		return nil
	}
	for _, e := range events {
		if e.TenantID == "" || e.Kind == "" || e.Verdict == "" {
			return airlock.Errorf(airlock.EINVALID, "egress event tenant, kind and verdict are required")
		}
	}
	err := db.inWriteTx(ctx, func(tx *sql.Tx) error {
		st, err := tx.PrepareContext(ctx, `INSERT INTO egress_events (
			tenant_id, session_id, execution_id, time, kind, protocol, name, port, sni, host,
			dialled, resolved, bytes_up, bytes_down, verdict, reason, flags, detail, duration_ms
		) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`)
		if err != nil {
			return err
		}
		defer st.Close()
		for _, e := range events {
			res, err := st.ExecContext(ctx, e.TenantID, e.SessionID, e.ExecutionID, nanos(e.Time), e.Kind,
				clipText(e.Protocol), clipText(e.Name), e.Port, clipText(e.SNI), clipText(e.Host),
				clipText(e.Dialled), clipText(e.Resolved), e.BytesUp, e.BytesDown, e.Verdict,
				clipText(e.Reason), clipText(strings.Join(e.Flags, ",")), clipText(e.Detail), e.DurationMS)
			if err != nil {
				return err
			}
			if id, err := res.LastInsertId(); err == nil {
				e.Seq = id
			}
		}
		return nil
	})
	if isForeignKey(err) {
		return airlock.Errorf(airlock.ENOTFOUND, "egress event of an unknown tenant")
	}
	return wrap("record egress", err)
}

// ListEgress returns a page of one session's or one execution's egress
// log, newest first.
func (db *DB) ListEgress(ctx context.Context, f airlock.EgressFilter) ([]*airlock.EgressEvent, error) {
	if f.TenantID == "" || (f.SessionID == "") == (f.ExecutionID == "") {
		return nil, airlock.Errorf(airlock.EINVALID, "egress list needs a tenant and one of session and execution")
	}
	limit := f.Limit
	if limit <= 0 || limit > MaxListLimit {
		limit = DefaultListLimit
	}
	q := `SELECT seq, tenant_id, session_id, execution_id, time, kind, protocol, name, port, sni, host,
		dialled, resolved, bytes_up, bytes_down, verdict, reason, flags, detail, duration_ms
		FROM egress_events WHERE tenant_id = ?`
	args := []any{f.TenantID}
	if f.SessionID != "" {
		q += ` AND session_id = ?`
		args = append(args, f.SessionID)
	} else {
		q += ` AND execution_id = ?`
		args = append(args, f.ExecutionID)
	}
	if f.Before > 0 {
		q += ` AND seq < ?`
		args = append(args, f.Before)
	}
	if f.Kind != "" {
		q += ` AND kind = ?`
		args = append(args, f.Kind)
	}
	if f.Verdict != "" {
		q += ` AND verdict = ?`
		args = append(args, f.Verdict)
	}
	q += ` ORDER BY seq DESC LIMIT ?`
	args = append(args, limit)
	rows, err := db.read.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, wrap("list egress", err)
	}
	defer rows.Close()
	out := []*airlock.EgressEvent{}
	for rows.Next() {
		var e airlock.EgressEvent
		var t int64
		var flags string
		if err := rows.Scan(&e.Seq, &e.TenantID, &e.SessionID, &e.ExecutionID, &t, &e.Kind, &e.Protocol,
			&e.Name, &e.Port, &e.SNI, &e.Host, &e.Dialled, &e.Resolved, &e.BytesUp, &e.BytesDown,
			&e.Verdict, &e.Reason, &flags, &e.Detail, &e.DurationMS); err != nil {
			return nil, wrap("list egress", err)
		}
		e.Time = fromNanos(t)
		if flags != "" {
			e.Flags = strings.Split(flags, ",")
		}
		out = append(out, &e)
	}
	return out, wrap("list egress", rows.Err())
}
