package store

import (
	"context"
	"encoding/json"
	"errors"

	"database/sql"

	"github.com/airlockhq/airlock"
)

var _ airlock.AbuseStore = (*DB)(nil)

// RecordAbuseEvent appends an event. An empty ID gets a new ULID and a
// zero Time the clock's time; both are written back.
func (db *DB) RecordAbuseEvent(ctx context.Context, ev *airlock.AbuseEvent) error {
	ctx, done := db.bound(ctx)
	defer done()
	if ev.TenantID == "" || ev.Detector == "" || ev.Action == "" {
		return airlock.Errorf(airlock.EINVALID, "abuse event tenant, detector and action are required")
	}
	now := db.now()
	id := ev.ID
	if id == "" {
		id = db.newID(now)
	}
	at := stamp(ev.Time, now)
	evidence := ev.Evidence
	if evidence == nil {
		evidence = map[string]any{}
	}
	b, err := json.Marshal(evidence)
	if err != nil {
		return airlock.Errorf(airlock.EINVALID, "abuse event evidence: %v", err)
	}
	err = db.inWriteTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO abuse_events (
			id, tenant_id, session_id, execution_id, sandbox_id, detector, summary, evidence, action, time
		) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`,
			id, ev.TenantID, ev.SessionID, ev.ExecutionID, ev.SandboxID, ev.Detector,
			db.clip(ev.Summary), db.json(b), ev.Action, nanos(at)); err != nil {
			return err
		}
		// The same decision in the event feed (GET /v1/events?cursor=)
		// and to webhooks, under the same ID.
		return db.recordEvent(ctx, tx, &airlock.Event{
			ID: id, Type: airlock.EventAbuseDetected, TenantID: ev.TenantID, SessionID: ev.SessionID, At: at,
			Reason: ev.Detector, Detail: ev.Summary,
			Data: map[string]any{"detector": ev.Detector, "action": ev.Action, "execution_id": ev.ExecutionID},
		}, now)
	})
	switch {
	case db.isForeignKey(err):
		return tenantNotFound(ev.TenantID)
	case db.isUnique(err):
		return airlock.Errorf(airlock.ECONFLICT, "abuse event %s exists", id)
	case err != nil:
		return db.wrap(ctx, "record abuse event", err)
	}
	ev.ID, ev.Time, ev.Evidence = id, at, evidence
	return nil
}

// ListAbuseEvents returns a page of events newest first: the tenant's, or
// every tenant's when TenantID is empty. Before is the ID of the last
// event of the previous page; one not in the listed set is EINVALID.
func (db *DB) ListAbuseEvents(ctx context.Context, f airlock.AbuseEventFilter) ([]*airlock.AbuseEvent, error) {
	ctx, done := db.bound(ctx)
	defer done()
	limit := f.Limit
	if limit <= 0 {
		limit = DefaultListLimit
	}
	limit = min(limit, MaxListLimit)
	var out []*airlock.AbuseEvent
	err := db.inReadTx(ctx, func(tx *sql.Tx) error {
		cursor := int64(1<<63 - 1)
		if f.Before != "" {
			err := tx.QueryRowContext(ctx, `SELECT seq FROM abuse_events WHERE id = $1 AND ($2 = '' OR tenant_id = $2)`,
				f.Before, f.TenantID).Scan(&cursor)
			if errors.Is(err, sql.ErrNoRows) {
				return airlock.Problem(airlock.EINVALID, "invalid-cursor", "unknown cursor %q", f.Before)
			} else if err != nil {
				return err
			}
		}
		rows, err := tx.QueryContext(ctx, `SELECT id, tenant_id, session_id, execution_id, sandbox_id,
			detector, summary, evidence, action, time FROM abuse_events
			WHERE ($1 = '' OR tenant_id = $1) AND seq < $2 ORDER BY seq DESC LIMIT $3`,
			f.TenantID, cursor, limit)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var ev airlock.AbuseEvent
			var evidence string
			var at int64
			if err := rows.Scan(&ev.ID, &ev.TenantID, &ev.SessionID, &ev.ExecutionID, &ev.SandboxID,
				&ev.Detector, &ev.Summary, &evidence, &ev.Action, &at); err != nil {
				return err
			}
			ev.Evidence = map[string]any{}
			json.Unmarshal([]byte(evidence), &ev.Evidence)
			ev.Time = fromNanos(at)
			out = append(out, &ev)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, db.wrap(ctx, "list abuse events", err)
	}
	return out, nil
}

// QuarantineTenant records (or replaces) the tenant's quarantine.
func (db *DB) QuarantineTenant(ctx context.Context, q *airlock.Quarantine) error {
	ctx, done := db.bound(ctx)
	defer done()
	if q.TenantID == "" {
		return airlock.Errorf(airlock.EINVALID, "quarantine tenant is required")
	}
	since := stamp(q.Since, db.now())
	_, err := db.write.ExecContext(ctx, `INSERT INTO tenant_quarantine (tenant_id, reason, event_id, since)
		VALUES ($1, $2, $3, $4) ON CONFLICT (tenant_id) DO UPDATE SET reason = excluded.reason,
		event_id = excluded.event_id, since = excluded.since`,
		q.TenantID, db.clip(q.Reason), q.EventID, nanos(since))
	if db.isForeignKey(err) {
		return tenantNotFound(q.TenantID)
	} else if err != nil {
		return db.wrap(ctx, "quarantine tenant", err)
	}
	q.Since = since
	return nil
}

// UnquarantineTenant lifts the tenant's quarantine; false if it had none.
func (db *DB) UnquarantineTenant(ctx context.Context, tenantID string) (bool, error) {
	ctx, done := db.bound(ctx)
	defer done()
	res, err := db.write.ExecContext(ctx, `DELETE FROM tenant_quarantine WHERE tenant_id = $1`, tenantID)
	if err != nil {
		return false, db.wrap(ctx, "unquarantine tenant", err)
	}
	return affected(res) > 0, nil
}

// TenantQuarantine returns the tenant's quarantine, nil if it has none.
func (db *DB) TenantQuarantine(ctx context.Context, tenantID string) (*airlock.Quarantine, error) {
	ctx, done := db.bound(ctx)
	defer done()
	q := airlock.Quarantine{TenantID: tenantID}
	var since int64
	err := db.read.QueryRowContext(ctx, `SELECT reason, event_id, since FROM tenant_quarantine WHERE tenant_id = $1`,
		tenantID).Scan(&q.Reason, &q.EventID, &since)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	} else if err != nil {
		return nil, db.wrap(ctx, "tenant quarantine", err)
	}
	q.Since = fromNanos(since)
	return &q, nil
}
