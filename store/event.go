package store

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"time"

	"database/sql"

	"github.com/airlockhq/airlock"
	"github.com/oklog/ulid/v2"
)

var _ airlock.EventStore = (*DB)(nil)

// RecordEvent appends an event and, in the same transaction, queues its
// delivery to each of the tenant's webhooks that takes its type. An
// empty ID gets a new ULID and a zero At the clock's time; both are
// written back.
func (db *DB) RecordEvent(ctx context.Context, ev *airlock.Event) error {
	ctx, done := db.bound(ctx)
	defer done()
	if ev.TenantID == "" || !airlock.ValidEventType(ev.Type) {
		return airlock.Errorf(airlock.EINVALID, "event tenant and a known type are required")
	}
	now := db.now()
	if ev.ID == "" {
		ev.ID = db.newID(now)
	}
	ev.At = stamp(ev.At, now)
	err := db.inWriteTx(ctx, func(tx *sql.Tx) error {
		return db.recordEvent(ctx, tx, ev, now)
	})
	switch {
	case db.isForeignKey(err):
		return tenantNotFound(ev.TenantID)
	case db.isUnique(err):
		return airlock.Errorf(airlock.ECONFLICT, "event %s exists", ev.ID)
	}
	return db.wrap(ctx, "record event", err)
}

// recordEvent inserts ev (ID and At set) and its deliveries in tx.
func (db *DB) recordEvent(ctx context.Context, tx *sql.Tx, ev *airlock.Event, now time.Time) error {
	data := ev.Data
	if data == nil {
		data = map[string]any{}
	}
	b, err := json.Marshal(data)
	if err != nil {
		return airlock.Errorf(airlock.EINVALID, "event data: %v", err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO events (id, tenant_id, session_id, type, reason, detail, data, at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
		ev.ID, ev.TenantID, ev.SessionID, ev.Type, db.clip(ev.Reason), db.clip(ev.Detail), db.json(b), nanos(ev.At)); err != nil {
		return err
	}
	rows, err := tx.QueryContext(ctx, `SELECT id FROM webhooks WHERE tenant_id = $1 AND (events = '' OR events LIKE $2)
		ORDER BY created_at, id`, ev.TenantID, "%,"+ev.Type+",%")
	if err != nil {
		return err
	}
	var hooks []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return err
		}
		hooks = append(hooks, id)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	at := now.UnixNano()
	for _, h := range hooks {
		if _, err := tx.ExecContext(ctx, `INSERT INTO webhook_deliveries (id, webhook_id, tenant_id, event_id, event_type,
			state, created_at, next_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
			db.newID(fromNanos(at)), h, ev.TenantID, ev.ID, ev.Type, airlock.DeliveryPending, at, at); err != nil {
			return err
		}
	}
	return nil
}

const eventColumns = `id, tenant_id, session_id, type, reason, detail, data, at`

func scanEvent(row scanner) (*airlock.Event, error) {
	var ev airlock.Event
	var data string
	var at int64
	if err := row.Scan(&ev.ID, &ev.TenantID, &ev.SessionID, &ev.Type, &ev.Reason, &ev.Detail, &data, &at); err != nil {
		return nil, err
	}
	if data != "" && data != "{}" {
		json.Unmarshal([]byte(data), &ev.Data)
	}
	ev.At = fromNanos(at)
	return &ev, nil
}

// ListEvents returns up to f.Limit events after the cursor f.After,
// oldest first, or with f.Newest before it, newest first: the tenant's,
// or every tenant's when TenantID is empty; only f.SessionID's when it
// is set. The cursor may be any of the tenant's events, of any session.
func (db *DB) ListEvents(ctx context.Context, f airlock.EventFilter) ([]*airlock.Event, error) {
	ctx, done := db.bound(ctx)
	defer done()
	limit := f.Limit
	if limit <= 0 {
		limit = DefaultListLimit
	}
	limit = min(limit, MaxListLimit)
	out := []*airlock.Event{}
	err := db.inReadTx(ctx, func(tx *sql.Tx) error {
		// seq of the cursor: oldest first reads above it, newest first
		// below it.
		var cursor int64
		if f.Newest {
			cursor = math.MaxInt64
		}
		if f.After != "" {
			err := tx.QueryRowContext(ctx, `SELECT seq FROM events WHERE id = $1 AND ($2 = '' OR tenant_id = $2)`,
				f.After, f.TenantID).Scan(&cursor)
			if errors.Is(err, sql.ErrNoRows) {
				pruned, perr := cursorPruned(ctx, tx, f.After)
				if perr != nil {
					return perr
				}
				if !pruned {
					return airlock.Problem(airlock.EINVALID, "invalid-cursor", "unknown cursor %q", f.After)
				}
				// The cursor's event was pruned: oldest first reads on
				// from the oldest kept; newest first there is nothing
				// older left.
				if f.Newest {
					return nil
				}
				cursor = 0
			} else if err != nil {
				return err
			}
		}
		q := `SELECT ` + eventColumns + ` FROM events
			WHERE ($1 = '' OR tenant_id = $1) AND ($2 = '' OR session_id = $2) AND seq > $3 ORDER BY seq LIMIT $4`
		if f.Newest {
			q = `SELECT ` + eventColumns + ` FROM events
			WHERE ($1 = '' OR tenant_id = $1) AND ($2 = '' OR session_id = $2) AND seq < $3 ORDER BY seq DESC LIMIT $4`
		}
		rows, err := tx.QueryContext(ctx, q, f.TenantID, f.SessionID, cursor, limit)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			ev, err := scanEvent(rows)
			if err != nil {
				return err
			}
			out = append(out, ev)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, db.wrap(ctx, "list events", err)
	}
	return out, nil
}

// Event returns an event by ID; ENOTFOUND if there is none.
func (db *DB) Event(ctx context.Context, id string) (*airlock.Event, error) {
	ctx, done := db.bound(ctx)
	defer done()
	ev, err := scanEvent(db.read.QueryRowContext(ctx, `SELECT `+eventColumns+` FROM events WHERE id = $1`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, airlock.Errorf(airlock.ENOTFOUND, "no event %s", id)
	}
	return ev, db.wrap(ctx, "event", err)
}

// cursorPruned reports whether cursor names an event that was pruned:
// an event ID (a ULID, ordered by time) before the oldest event kept, of
// any tenant, so that another tenant's kept event is not taken for one;
// or any event ID when none is kept. Reading on from the oldest kept
// shows the tenant only its own events either way.
func cursorPruned(ctx context.Context, tx *sql.Tx, cursor string) (bool, error) {
	if _, err := ulid.ParseStrict(cursor); err != nil {
		return false, nil
	}
	var oldest string
	err := tx.QueryRowContext(ctx, `SELECT id FROM events ORDER BY seq LIMIT 1`).Scan(&oldest)
	if errors.Is(err, sql.ErrNoRows) {
		return true, nil
	} else if err != nil {
		return false, err
	}
	return cursor < oldest, nil
}

var _ airlock.SessionEventGaps = (*DB)(nil)

// LastSessionEvents returns this node's sessions that are live, or that
// ended at or after since, each with the type of its newest event (by
// the feed's order; "" when it has none), oldest session first.
func (db *DB) LastSessionEvents(ctx context.Context, since time.Time) ([]airlock.SessionLastEvent, error) {
	ctx, done := db.bound(ctx)
	defer done()
	rows, err := db.read.QueryContext(ctx, `SELECT `+sessionColumns+`,
		COALESCE((SELECT e.type FROM events e WHERE e.tenant_id = sessions.tenant_id AND e.session_id = sessions.id
			ORDER BY e.seq DESC LIMIT 1), '')
		FROM sessions WHERE node_id = $1 AND (state NOT IN ('destroyed', 'failed', 'lost') OR ended_at >= $2)
		ORDER BY created_at, id`, db.node, nanos(since))
	if err != nil {
		return nil, db.wrap(ctx, "last session events", err)
	}
	defer rows.Close()
	var out []airlock.SessionLastEvent
	for rows.Next() {
		var last string
		s, err := scanSession(withExtra{rows, []any{&last}})
		if err != nil {
			return nil, db.wrap(ctx, "last session events", err)
		}
		out = append(out, airlock.SessionLastEvent{Session: s, LastType: last})
	}
	return out, db.wrap(ctx, "last session events", rows.Err())
}

// withExtra scans the columns of a row beyond those its scanner's caller
// takes into extra.
type withExtra struct {
	scanner
	extra []any
}

func (w withExtra) Scan(dest ...any) error { return w.scanner.Scan(append(dest, w.extra...)...) }
