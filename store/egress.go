package store

import (
	"context"
	"fmt"
	"strings"

	"database/sql"

	"github.com/airlockhq/airlock"
)

var _ airlock.EgressStore = (*DB)(nil)

// RecordEgress appends events in one transaction and writes their Seq
// back.
func (db *DB) RecordEgress(ctx context.Context, events []*airlock.EgressEvent) error {
	ctx, done := db.bound(ctx)
	defer done()
	if len(events) == 0 {
		return nil
	}
	for _, e := range events {
		if e.TenantID == "" || e.Kind == "" || e.Verdict == "" {
			return airlock.Errorf(airlock.EINVALID, "egress event tenant, kind and verdict are required")
		}
	}
	seqs := make([]int64, len(events))
	err := db.inWriteTx(ctx, func(tx *sql.Tx) error {
		for i, e := range events {
			err := tx.QueryRowContext(ctx, `INSERT INTO egress_events (
				tenant_id, session_id, execution_id, time, kind, protocol, name, port, sni, host,
				dialled, resolved, bytes_up, bytes_down, verdict, reason, flags, detail, duration_ms
			) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19)
			RETURNING seq`,
				e.TenantID, e.SessionID, e.ExecutionID, nanos(e.Time), db.clip(e.Kind),
				db.clip(e.Protocol), db.clip(e.Name), e.Port, db.clip(e.SNI), db.clip(e.Host),
				db.clip(e.Dialled), db.clip(e.Resolved), e.BytesUp, e.BytesDown, db.clip(e.Verdict),
				db.clip(e.Reason), db.clip(strings.Join(e.Flags, ",")), db.clip(e.Detail), e.DurationMS).Scan(&seqs[i])
			if err != nil {
				return err
			}
		}
		return nil
	})
	if db.isForeignKey(err) {
		return airlock.Errorf(airlock.ENOTFOUND, "egress event of an unknown tenant")
	}
	if err != nil {
		return db.wrap(ctx, "record egress", err)
	}
	for i, e := range events {
		e.Seq = seqs[i]
	}
	return nil
}

// args numbers query arguments as they are added.
type args []any

func (a *args) add(v any) string {
	*a = append(*a, v)
	return fmt.Sprintf("$%d", len(*a))
}

// ListEgress returns a page of one session's or one execution's egress
// log, newest first.
func (db *DB) ListEgress(ctx context.Context, f airlock.EgressFilter) ([]*airlock.EgressEvent, error) {
	ctx, done := db.bound(ctx)
	defer done()
	if f.TenantID == "" || (f.SessionID == "") == (f.ExecutionID == "") {
		return nil, airlock.Errorf(airlock.EINVALID, "egress list needs a tenant and one of session and execution")
	}
	limit := f.Limit
	if limit <= 0 || limit > MaxListLimit {
		limit = DefaultListLimit
	}
	var a args
	q := `SELECT seq, tenant_id, session_id, execution_id, time, kind, protocol, name, port, sni, host,
		dialled, resolved, bytes_up, bytes_down, verdict, reason, flags, detail, duration_ms
		FROM egress_events WHERE tenant_id = ` + a.add(f.TenantID)
	if f.SessionID != "" {
		q += ` AND session_id = ` + a.add(f.SessionID)
	} else {
		q += ` AND execution_id = ` + a.add(f.ExecutionID)
	}
	if f.Before > 0 {
		q += ` AND seq < ` + a.add(f.Before)
	}
	if f.Kind != "" {
		q += ` AND kind = ` + a.add(f.Kind)
	}
	if f.Verdict != "" {
		q += ` AND verdict = ` + a.add(f.Verdict)
	}
	q += ` ORDER BY seq DESC LIMIT ` + a.add(limit)
	rows, err := db.read.QueryContext(ctx, q, a...)
	if err != nil {
		return nil, db.wrap(ctx, "list egress", err)
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
			return nil, db.wrap(ctx, "list egress", err)
		}
		e.Time = fromNanos(t)
		if flags != "" {
			e.Flags = strings.Split(flags, ",")
		}
		out = append(out, &e)
	}
	return out, db.wrap(ctx, "list egress", rows.Err())
}
