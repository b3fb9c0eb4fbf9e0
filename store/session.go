package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"database/sql"

	"github.com/airlockhq/airlock"
)

var _ airlock.SessionStore = (*DB)(nil)

// CreateSession records s, which must be in state creating (or empty,
// meaning creating). An empty ID gets a new ULID and a zero CreatedAt the
// clock's time; both are written back. An unknown tenant is ENOTFOUND; a
// taken ID is ECONFLICT.
func (db *DB) CreateSession(ctx context.Context, s *airlock.Session) error {
	ctx, done := db.bound(ctx)
	defer done()
	switch {
	case s.TenantID == "":
		return airlock.Errorf(airlock.EINVALID, "session tenant is required")
	case s.Image == "" || s.Size == "":
		return airlock.Errorf(airlock.EINVALID, "session image and size are required")
	case s.State != "" && s.State != airlock.SessionCreating:
		return airlock.Errorf(airlock.EINVALID, "a new session must be creating, not %q", s.State)
	}
	now := db.now()
	id := s.ID
	if id == "" {
		id = db.newID(now)
	}
	created := stamp(s.CreatedAt, now)
	limits, network, usage, err := db.sessionJSON(s)
	if err != nil {
		return err
	}
	scopes, err := json.Marshal(append([]string{}, s.BrokerScopes...))
	if err != nil {
		return fmt.Errorf("store: encode session: %w", err)
	}
	_, err = db.write.ExecContext(ctx, `INSERT INTO sessions (
		id, tenant_id, image, size, state, limits, network, usage, idempotency_key,
		request_hash, created_at, expires_at, last_active_at, ended_at, end_reason, end_detail, broker_scopes,
		backend, start_source, sandbox_id, node_id, lifecycle
	) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, NULL, '', '', $14, $15, $16, $17, $18, $19)`,
		id, s.TenantID, s.Image, string(s.Size), string(airlock.SessionCreating), limits, network,
		usage, db.text(s.IdempotencyKey), s.RequestHash, nanos(created), nanos(stamp(s.ExpiresAt, now)),
		nanos(stamp(s.LastActiveAt, now)), db.json(scopes), s.Backend, s.StartSource, s.SandboxID, db.node, lifecycleText(s.Lifecycle))
	switch {
	case db.isForeignKey(err):
		return tenantNotFound(s.TenantID)
	case db.isUnique(err):
		return airlock.Errorf(airlock.ECONFLICT, "session %s exists", id)
	case err != nil:
		return db.wrap(ctx, "create session", err)
	}
	s.ID, s.State, s.CreatedAt = id, airlock.SessionCreating, created
	s.ExpiresAt, s.LastActiveAt = stamp(s.ExpiresAt, now), stamp(s.LastActiveAt, now)
	return nil
}

func (db *DB) sessionJSON(s *airlock.Session) (limits, network, usage string, err error) {
	l, err1 := json.Marshal(s.Limits)
	n, err2 := json.Marshal(s.Network)
	u, err3 := json.Marshal(s.Usage)
	if err := errors.Join(err1, err2, err3); err != nil {
		return "", "", "", fmt.Errorf("store: encode session: %w", err)
	}
	return db.json(l), db.json(n), db.json(u), nil
}

// UpdateSession writes the mutable fields of the tenant's session: state,
// limits, usage, expiry, last activity, the end, and how its sandbox was
// obtained (backend, start source, sandbox ID). The identifying fields
// set at creation are not changed. ENOTFOUND if the tenant has no such
// session; ECONFLICT if it has already ended (a final state is final).
func (db *DB) UpdateSession(ctx context.Context, s *airlock.Session) error {
	ctx, done := db.bound(ctx)
	defer done()
	switch {
	case s.ID == "" || s.TenantID == "":
		return airlock.Errorf(airlock.EINVALID, "session id and tenant are required")
	case !s.State.Valid():
		return airlock.Errorf(airlock.EINVALID, "unknown session state %q", s.State)
	}
	limits, network, usage, err := db.sessionJSON(s)
	if err != nil {
		return err
	}
	err = db.inWriteTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE sessions SET
			state = $1, limits = $2, network = $3, usage = $4, expires_at = $5, last_active_at = $6,
			ended_at = $7, end_reason = $8, end_detail = $9, backend = $10, start_source = $11, sandbox_id = $12
			WHERE id = $13 AND tenant_id = $14 AND state NOT IN ('destroyed', 'failed', 'lost')`,
			string(s.State), limits, network, usage, nanos(s.ExpiresAt), nanos(s.LastActiveAt),
			nullNanos(s.EndedAt), db.text(s.EndReason), db.text(s.EndDetail), s.Backend, s.StartSource, s.SandboxID, s.ID, s.TenantID)
		if err != nil {
			return err
		}
		if affected(res) == 1 {
			return nil
		}
		var cur string
		err = tx.QueryRowContext(ctx, `SELECT state FROM sessions WHERE id = $1 AND tenant_id = $2`,
			s.ID, s.TenantID).Scan(&cur)
		if errors.Is(err, sql.ErrNoRows) {
			return sessionNotFound(s.ID)
		} else if err != nil {
			return err
		}
		return airlock.Problem(airlock.ECONFLICT, "session-ended", "session %s has already ended (%s)", s.ID, cur)
	})
	return db.wrap(ctx, "update session", err)
}

const sessionColumns = `id, tenant_id, image, size, state, limits, network, usage, idempotency_key,
	request_hash, created_at, expires_at, last_active_at, ended_at, end_reason, end_detail, broker_scopes,
	backend, start_source, sandbox_id, lifecycle`

// lifecycleText is the stored form of a lifecycle: empty for the default
// (end at the timeout, no auto-resume), else its JSON.
func lifecycleText(l airlock.SessionLifecycle) string {
	if !l.Pauses() && !l.Resumes() {
		return ""
	}
	b, _ := json.Marshal(l)
	return string(b)
}

func scanSession(row scanner) (*airlock.Session, error) {
	var s airlock.Session
	var limits, network, usage, scopes, lifecycle string
	var created, expires, active int64
	var ended *int64
	err := row.Scan(&s.ID, &s.TenantID, &s.Image, &s.Size, &s.State, &limits, &network, &usage,
		&s.IdempotencyKey, &s.RequestHash, &created, &expires, &active, &ended, &s.EndReason, &s.EndDetail, &scopes,
		&s.Backend, &s.StartSource, &s.SandboxID, &lifecycle)
	if err != nil {
		return nil, err
	}
	s.Lifecycle.OnTimeout = airlock.OnTimeoutEnd
	if lifecycle != "" {
		if err := json.Unmarshal([]byte(lifecycle), &s.Lifecycle); err != nil {
			return nil, fmt.Errorf("decode session %s lifecycle: %w", s.ID, err)
		}
	}
	if err := errors.Join(json.Unmarshal([]byte(limits), &s.Limits), json.Unmarshal([]byte(network), &s.Network),
		json.Unmarshal([]byte(usage), &s.Usage), json.Unmarshal([]byte(scopes), &s.BrokerScopes)); err != nil {
		return nil, fmt.Errorf("decode session %s: %w", s.ID, err)
	}
	s.CreatedAt, s.ExpiresAt, s.LastActiveAt = fromNanos(created), fromNanos(expires), fromNanos(active)
	s.EndedAt = fromNullNanos(ended)
	return &s, nil
}

// Session returns the tenant's session. Another tenant's session is
// ENOTFOUND, like a missing one.
func (db *DB) Session(ctx context.Context, tenantID, id string) (*airlock.Session, error) {
	ctx, done := db.bound(ctx)
	defer done()
	s, err := scanSession(db.read.QueryRowContext(ctx,
		`SELECT `+sessionColumns+` FROM sessions WHERE id = $1 AND tenant_id = $2`, id, tenantID))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, sessionNotFound(id)
	}
	if err != nil {
		return nil, db.wrap(ctx, "get session", err)
	}
	return s, nil
}

// ListSessions returns a page of the tenant's sessions, newest first by
// (created_at, id), like ListExecutions: Limit defaults to
// DefaultListLimit and is capped at MaxListLimit; Before is the ID of the
// last session of the previous page (an ID the tenant does not have is
// EINVALID). LiveOnly leaves out sessions that have ended.
func (db *DB) ListSessions(ctx context.Context, f airlock.SessionFilter) ([]*airlock.Session, error) {
	ctx, done := db.bound(ctx)
	defer done()
	if f.TenantID == "" {
		return nil, airlock.Errorf(airlock.EINVALID, "tenant is required to list sessions")
	}
	limit := f.Limit
	if limit <= 0 {
		limit = DefaultListLimit
	}
	limit = min(limit, MaxListLimit)
	live := ""
	if f.LiveOnly {
		live = ` AND state NOT IN ('destroyed', 'failed', 'lost')`
	}
	var out []*airlock.Session
	err := db.inReadTx(ctx, func(tx *sql.Tx) error {
		var rows *sql.Rows
		var err error
		if f.Before == "" {
			rows, err = tx.QueryContext(ctx, `SELECT `+sessionColumns+` FROM sessions
				WHERE tenant_id = $1`+live+`
				ORDER BY created_at DESC, id DESC LIMIT $2`, f.TenantID, limit)
		} else {
			var cursorAt int64
			err = tx.QueryRowContext(ctx, `SELECT created_at FROM sessions WHERE id = $1 AND tenant_id = $2`,
				f.Before, f.TenantID).Scan(&cursorAt)
			if errors.Is(err, sql.ErrNoRows) {
				return airlock.Problem(airlock.EINVALID, "invalid-cursor", "unknown cursor %q", f.Before)
			} else if err != nil {
				return err
			}
			rows, err = tx.QueryContext(ctx, `SELECT `+sessionColumns+` FROM sessions
				WHERE tenant_id = $1 AND (created_at, id) < ($2, $3)`+live+`
				ORDER BY created_at DESC, id DESC LIMIT $4`, f.TenantID, cursorAt, f.Before, limit)
		}
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			s, err := scanSession(rows)
			if err != nil {
				return err
			}
			out = append(out, s)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, db.wrap(ctx, "list sessions", err)
	}
	return out, nil
}

// LiveSessions returns every session of this node (Config.NodeID), of
// every tenant, that has not ended, oldest first.
func (db *DB) LiveSessions(ctx context.Context) ([]*airlock.Session, error) {
	ctx, done := db.bound(ctx)
	defer done()
	rows, err := db.read.QueryContext(ctx, `SELECT `+sessionColumns+` FROM sessions
		WHERE state NOT IN ('destroyed', 'failed', 'lost') AND node_id = $1 ORDER BY created_at, id`, db.node)
	if err != nil {
		return nil, db.wrap(ctx, "live sessions", err)
	}
	defer rows.Close()
	var out []*airlock.Session
	for rows.Next() {
		s, err := scanSession(rows)
		if err != nil {
			return nil, db.wrap(ctx, "live sessions", err)
		}
		out = append(out, s)
	}
	return out, db.wrap(ctx, "live sessions", rows.Err())
}

func sessionNotFound(id string) error {
	return &airlock.Error{Code: airlock.ENOTFOUND, Message: fmt.Sprintf("no session %s", id), Err: airlock.ErrNotFound}
}

// ClaimIdempotencyKey inserts k unless the tenant has an unexpired row for
// k.Key, in one transaction: an expired row is deleted first, and the
// primary key (tenant_id, key) lets exactly one of several concurrent
// claims win (the insert of a later claim waits for an earlier one's
// transaction, then does nothing, and the claim reads the winner's row).
// It returns the row that holds the key and whether it is k.
func (db *DB) ClaimIdempotencyKey(ctx context.Context, k *airlock.IdempotencyKey) (*airlock.IdempotencyKey, bool, error) {
	ctx, done := db.bound(ctx)
	defer done()
	switch {
	case k.TenantID == "" || k.SessionID == "" || k.RequestHash == "":
		return nil, false, airlock.Errorf(airlock.EINVALID, "idempotency key needs a tenant, a session and a request hash")
	case !airlock.ValidIdempotencyKey(k.Key):
		return nil, false, airlock.Errorf(airlock.EINVALID, "invalid idempotency key")
	case !k.ExpiresAt.After(k.CreatedAt):
		return nil, false, airlock.Errorf(airlock.EINVALID, "idempotency key must expire after it is created")
	}
	var held *airlock.IdempotencyKey
	claimed := false
	err := db.inWriteTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `DELETE FROM idempotency_keys
			WHERE tenant_id = $1 AND key = $2 AND expires_at <= $3`, k.TenantID, k.Key, nanos(k.CreatedAt)); err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, `INSERT INTO idempotency_keys
			(tenant_id, key, request_hash, session_id, created_at, expires_at) VALUES ($1, $2, $3, $4, $5, $6)
			ON CONFLICT (tenant_id, key) DO NOTHING`,
			k.TenantID, k.Key, k.RequestHash, k.SessionID, nanos(k.CreatedAt), nanos(k.ExpiresAt))
		switch {
		case db.isForeignKey(err):
			return tenantNotFound(k.TenantID)
		case err != nil:
			return err
		case affected(res) == 1:
			claimed = true
			c := *k
			c.CreatedAt, c.ExpiresAt = fromNanos(nanos(k.CreatedAt)), fromNanos(nanos(k.ExpiresAt))
			held = &c
			return nil
		}
		var h airlock.IdempotencyKey
		var created, expires int64
		err = tx.QueryRowContext(ctx, `SELECT tenant_id, key, request_hash, session_id, created_at, expires_at
			FROM idempotency_keys WHERE tenant_id = $1 AND key = $2`, k.TenantID, k.Key).
			Scan(&h.TenantID, &h.Key, &h.RequestHash, &h.SessionID, &created, &expires)
		if err != nil {
			return err
		}
		h.CreatedAt, h.ExpiresAt = fromNanos(created), fromNanos(expires)
		held = &h
		return nil
	})
	if err != nil {
		return nil, false, db.wrap(ctx, "claim idempotency key", err)
	}
	return held, claimed, nil
}

// ReleaseIdempotencyKey deletes the tenant's key if it still names
// sessionID; otherwise it does nothing.
func (db *DB) ReleaseIdempotencyKey(ctx context.Context, tenantID, key, sessionID string) error {
	ctx, done := db.bound(ctx)
	defer done()
	_, err := db.write.ExecContext(ctx, `DELETE FROM idempotency_keys
		WHERE tenant_id = $1 AND key = $2 AND session_id = $3`, tenantID, key, sessionID)
	return db.wrap(ctx, "release idempotency key", err)
}

// DeleteExpiredIdempotencyKeys deletes every key that expired at or
// before now and returns how many.
func (db *DB) DeleteExpiredIdempotencyKeys(ctx context.Context, now time.Time) (int, error) {
	ctx, done := db.bound(ctx)
	defer done()
	res, err := db.write.ExecContext(ctx, `DELETE FROM idempotency_keys WHERE expires_at <= $1`, nanos(now))
	if err != nil {
		return 0, db.wrap(ctx, "delete expired idempotency keys", err)
	}
	return int(affected(res)), nil
}
