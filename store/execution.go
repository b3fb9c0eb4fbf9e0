package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"database/sql"

	"github.com/airlockhq/airlock"
)

// CreateExecution records e as it starts. Status must be running (or empty,
// meaning running). An empty ID gets a new ULID and a zero CreatedAt the
// clock's time; ID, Status and CreatedAt are written back to e. An unknown
// tenant is ENOTFOUND; a taken ID is ECONFLICT.
func (db *DB) CreateExecution(ctx context.Context, e *airlock.Execution) error {
	ctx, done := db.bound(ctx)
	defer done()
	switch {
	case e.TenantID == "":
		return airlock.Errorf(airlock.EINVALID, "execution tenant is required")
	case e.Language == "":
		return airlock.Errorf(airlock.EINVALID, "execution language is required")
	case e.Status != "" && e.Status != airlock.StatusRunning:
		return airlock.Errorf(airlock.EINVALID, "a new execution must be running, not %q", e.Status)
	}
	now := db.now()
	id := e.ID
	if id == "" {
		id = db.newID(now)
	}
	created := stamp(e.CreatedAt, now)
	_, err := db.write.ExecContext(ctx, `INSERT INTO executions (
		exec_id, tenant_id, session_id, agent_id, language, image, code_sha256, status,
		exit_code, stdout, stderr, stdout_truncated, stderr_truncated, duration_ms,
		peak_memory_mb, timed_out, oom_killed, had_network_attempt, error, artifacts_truncated,
		created_at, finished_at, findings, trace_id, node_id
	) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, NULL, $22, $23, $24)`,
		id, e.TenantID, e.SessionID, e.AgentID, string(e.Language), e.Image, e.CodeSHA256,
		string(airlock.StatusRunning), e.ExitCode, db.text(e.Stdout), db.text(e.Stderr), e.StdoutTruncated,
		e.StderrTruncated, e.DurationMS, e.PeakMemoryMB, e.TimedOut, e.OOMKilled,
		e.HadNetworkAttempt, db.text(e.Error), e.ArtifactsTruncated, nanos(created), db.encodeFindings(e.Findings), db.text(e.TraceID), db.node)
	switch {
	case db.isForeignKey(err):
		return tenantNotFound(e.TenantID)
	case db.isUnique(err):
		return airlock.Errorf(airlock.ECONFLICT, "execution %s exists", id)
	case err != nil:
		return db.wrap(ctx, "create execution", err)
	}
	e.ID, e.Status, e.CreatedAt, e.FinishedAt = id, airlock.StatusRunning, created, nil
	if e.Findings == nil {
		e.Findings = []airlock.GuardFinding{}
	}
	return nil
}

// FinishExecution writes the outcome of a running execution (status, exit
// code, output, measurements, error, whether artifacts were truncated,
// finished time) and inserts its artifacts, in one transaction. Status
// must be completed, failed or blocked (by the guard); a nil FinishedAt
// means the clock's time. Artifacts get the execution's ID and tenant,
// and a new ULID if their ID is empty. The identifying fields set at
// creation are not changed. ENOTFOUND if the tenant has no such
// execution; ECONFLICT if it is no longer running.
func (db *DB) FinishExecution(ctx context.Context, e *airlock.Execution) error {
	ctx, done := db.bound(ctx)
	defer done()
	status := e.Status
	switch {
	case e.ID == "" || e.TenantID == "":
		return airlock.Errorf(airlock.EINVALID, "execution id and tenant are required")
	case status != airlock.StatusCompleted && status != airlock.StatusFailed && status != airlock.StatusBlocked:
		return airlock.Errorf(airlock.EINVALID, "a finished execution must be completed, failed or blocked, not %q", status)
	}
	now := db.now()
	var finished time.Time
	if e.FinishedAt != nil {
		finished = *e.FinishedAt
	}
	finished = stamp(finished, now)

	arts := make([]airlock.Artifact, len(e.Artifacts))
	copy(arts, e.Artifacts)
	for i := range arts {
		a := &arts[i]
		switch {
		case a.ExecutionID != "" && a.ExecutionID != e.ID:
			return airlock.Errorf(airlock.EINVALID, "artifact %q belongs to another execution", a.Filename)
		case a.TenantID != "" && a.TenantID != e.TenantID:
			return airlock.Errorf(airlock.EINVALID, "artifact %q belongs to another tenant", a.Filename)
		case a.Filename == "":
			return airlock.Errorf(airlock.EINVALID, "artifact filename is required")
		}
		a.ExecutionID, a.TenantID = e.ID, e.TenantID
		if a.ID == "" {
			a.ID = db.newID(now)
		}
	}

	stored, blocked := status, false
	if status == airlock.StatusBlocked {
		stored, blocked = airlock.StatusFailed, true // see migration 0010
	}
	err := db.inWriteTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE executions SET
			blocked = $1, status = $2, exit_code = $3, stdout = $4, stderr = $5, stdout_truncated = $6,
			stderr_truncated = $7, duration_ms = $8, peak_memory_mb = $9, timed_out = $10,
			oom_killed = $11, had_network_attempt = $12, error = $13, artifacts_truncated = $14,
			finished_at = $15, start_source = $16, phases = $17, backend = $18,
			ended_by = $19, limits_hit = $20, accelerator = $21, last_sample = $22
			WHERE exec_id = $23 AND tenant_id = $24 AND status = 'running'`,
			blocked, string(stored), e.ExitCode, db.text(e.Stdout), db.text(e.Stderr), e.StdoutTruncated,
			e.StderrTruncated, e.DurationMS, e.PeakMemoryMB, e.TimedOut,
			e.OOMKilled, e.HadNetworkAttempt, db.text(e.Error), e.ArtifactsTruncated, nanos(finished),
			string(e.StartSource), db.encodePhases(e.Phases), e.Backend,
			db.text(e.EndedBy), db.text(strings.Join(e.LimitsHit, ",")), db.text(e.Accelerator),
			encodeSample(e.LastSample), e.ID, e.TenantID)
		if err != nil {
			return err
		}
		if affected(res) == 0 {
			var cur string
			err := tx.QueryRowContext(ctx,
				`SELECT status FROM executions WHERE exec_id = $1 AND tenant_id = $2`,
				e.ID, e.TenantID).Scan(&cur)
			if errors.Is(err, sql.ErrNoRows) {
				return executionNotFound(e.ID)
			} else if err != nil {
				return err
			}
			return airlock.Errorf(airlock.ECONFLICT, "execution %s is already %s", e.ID, cur)
		}
		for _, a := range arts {
			_, err := tx.ExecContext(ctx, `INSERT INTO artifacts (
				id, exec_id, tenant_id, filename, size_bytes, content_type, sha256, created_at
			) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
				a.ID, a.ExecutionID, a.TenantID, db.text(a.Filename), a.SizeBytes, db.text(a.ContentType),
				a.SHA256, nanos(finished))
			if db.isUnique(err) {
				return airlock.Errorf(airlock.ECONFLICT, "artifact %s exists", a.ID)
			} else if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return db.wrap(ctx, "finish execution", err)
	}
	e.Status, e.FinishedAt, e.Artifacts = status, &finished, arts
	return nil
}

// executionColumns lists the columns scanExecution reads; listColumns is
// the same with empty stdout and stderr, which lists do not carry.
const (
	executionColumns = `exec_id, tenant_id, session_id, agent_id, language, image, code_sha256,
		status, exit_code, stdout, stderr, stdout_truncated, stderr_truncated, duration_ms,
		peak_memory_mb, timed_out, oom_killed, had_network_attempt, error, artifacts_truncated,
		created_at, finished_at, start_source, phases, backend, findings, blocked, ended_by, limits_hit, trace_id, accelerator, last_sample`
	listColumns = `exec_id, tenant_id, session_id, agent_id, language, image, code_sha256,
		status, exit_code, '', '', stdout_truncated, stderr_truncated, duration_ms,
		peak_memory_mb, timed_out, oom_killed, had_network_attempt, error, artifacts_truncated,
		created_at, finished_at, start_source, phases, backend, findings, blocked, ended_by, limits_hit, trace_id, accelerator, last_sample`
)

func scanExecution(row scanner) (*airlock.Execution, error) {
	var e airlock.Execution
	var created int64
	var finished *int64
	var phases, findings, limitsHit, lastSample string
	var blocked bool
	err := row.Scan(&e.ID, &e.TenantID, &e.SessionID, &e.AgentID, &e.Language, &e.Image,
		&e.CodeSHA256, &e.Status, &e.ExitCode, &e.Stdout, &e.Stderr, &e.StdoutTruncated,
		&e.StderrTruncated, &e.DurationMS, &e.PeakMemoryMB, &e.TimedOut, &e.OOMKilled,
		&e.HadNetworkAttempt, &e.Error, &e.ArtifactsTruncated, &created, &finished,
		&e.StartSource, &phases, &e.Backend, &findings, &blocked, &e.EndedBy, &limitsHit, &e.TraceID, &e.Accelerator, &lastSample)
	if err != nil {
		return nil, err
	}
	e.Phases = decodePhases(phases)
	e.Findings = decodeFindings(findings)
	if blocked {
		e.Status = airlock.StatusBlocked
	}
	if limitsHit != "" {
		e.LimitsHit = strings.Split(limitsHit, ",")
	}
	e.LastSample = decodeSample(lastSample)
	e.CreatedAt = fromNanos(created)
	e.FinishedAt = fromNullNanos(finished)
	return &e, nil
}

// Execution returns the tenant's execution with its artifacts (ordered by
// filename). Another tenant's execution is ENOTFOUND, like a missing one.
func (db *DB) Execution(ctx context.Context, tenantID, id string) (*airlock.Execution, error) {
	ctx, done := db.bound(ctx)
	defer done()
	var e *airlock.Execution
	err := db.inReadTx(ctx, func(tx *sql.Tx) error {
		var err error
		e, err = scanExecution(tx.QueryRowContext(ctx,
			`SELECT `+executionColumns+` FROM executions WHERE exec_id = $1 AND tenant_id = $2`,
			id, tenantID))
		if errors.Is(err, sql.ErrNoRows) {
			return executionNotFound(id)
		} else if err != nil {
			return err
		}
		rows, err := tx.QueryContext(ctx, `SELECT `+artifactColumns+` FROM artifacts
			WHERE exec_id = $1 AND tenant_id = $2 ORDER BY filename, id`, id, tenantID)
		if err != nil {
			return err
		}
		defer rows.Close()
		e.Artifacts = []airlock.Artifact{}
		for rows.Next() {
			a, err := scanArtifact(rows)
			if err != nil {
				return err
			}
			e.Artifacts = append(e.Artifacts, *a)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, db.wrap(ctx, "get execution", err)
	}
	return e, nil
}

// ListExecutions returns a page of the tenant's executions, newest first by
// (created_at, id). Limit defaults to DefaultListLimit and is capped at
// MaxListLimit. Before, if set, is the ID of an execution of the same tenant
// (the last of the previous page): only executions strictly older than it
// are listed; an ID the tenant does not have is EINVALID. Listed executions
// carry no stdout, stderr or artifacts.
func (db *DB) ListExecutions(ctx context.Context, f airlock.ExecutionFilter) ([]*airlock.Execution, error) {
	ctx, done := db.bound(ctx)
	defer done()
	if f.TenantID == "" {
		return nil, airlock.Errorf(airlock.EINVALID, "tenant is required to list executions")
	}
	limit := f.Limit
	if limit <= 0 {
		limit = DefaultListLimit
	}
	limit = min(limit, MaxListLimit)

	var es []*airlock.Execution
	err := db.inReadTx(ctx, func(tx *sql.Tx) error {
		var rows *sql.Rows
		var err error
		if f.Before == "" {
			rows, err = tx.QueryContext(ctx, `SELECT `+listColumns+` FROM executions
				WHERE tenant_id = $1
				ORDER BY created_at DESC, exec_id DESC LIMIT $2`, f.TenantID, limit)
		} else {
			var cursorAt int64
			err = tx.QueryRowContext(ctx,
				`SELECT created_at FROM executions WHERE exec_id = $1 AND tenant_id = $2`,
				f.Before, f.TenantID).Scan(&cursorAt)
			if errors.Is(err, sql.ErrNoRows) {
				return airlock.Problem(airlock.EINVALID, "invalid-cursor", "unknown cursor %q", f.Before)
			} else if err != nil {
				return err
			}
			rows, err = tx.QueryContext(ctx, `SELECT `+listColumns+` FROM executions
				WHERE tenant_id = $1 AND (created_at, exec_id) < ($2, $3)
				ORDER BY created_at DESC, exec_id DESC LIMIT $4`,
				f.TenantID, cursorAt, f.Before, limit)
		}
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			e, err := scanExecution(rows)
			if err != nil {
				return err
			}
			es = append(es, e)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, db.wrap(ctx, "list executions", err)
	}
	return es, nil
}

// FailRunningExecutions marks failed, with the reason and finished now,
// every running execution of this node (Config.NodeID) that is not of a
// live session, and returns how many it marked. Executions of live sessions are the session service's
// to adopt or fail when it recovers them.
func (db *DB) FailRunningExecutions(ctx context.Context, reason string) (int, error) {
	ctx, done := db.bound(ctx)
	defer done()
	res, err := db.write.ExecContext(ctx, `UPDATE executions
		SET status = 'failed', error = $1, finished_at = $2
		WHERE status = 'running' AND node_id = $3 AND (session_id = '' OR session_id NOT IN
			(SELECT id FROM sessions WHERE state IN ('creating', 'ready', 'busy')))`, db.text(reason), nanos(db.now()), db.node)
	if err != nil {
		return 0, db.wrap(ctx, "fail running executions", err)
	}
	return int(affected(res)), nil
}

// RunningExecutions returns the session's executions recorded as running,
// oldest first (without artifacts: a running execution has none yet).
func (db *DB) RunningExecutions(ctx context.Context, sessionID string) ([]*airlock.Execution, error) {
	ctx, done := db.bound(ctx)
	defer done()
	rows, err := db.read.QueryContext(ctx, `SELECT `+executionColumns+` FROM executions
		WHERE status = 'running' AND session_id = $1 ORDER BY created_at, exec_id`, sessionID)
	if err != nil {
		return nil, db.wrap(ctx, "list running executions", err)
	}
	defer rows.Close()
	var out []*airlock.Execution
	for rows.Next() {
		e, err := scanExecution(rows)
		if err != nil {
			return nil, db.wrap(ctx, "list running executions", err)
		}
		e.Artifacts = []airlock.Artifact{}
		out = append(out, e)
	}
	return out, db.wrap(ctx, "list running executions", rows.Err())
}

func executionNotFound(id string) error {
	return fmt.Errorf("execution %s: %w", id, airlock.ErrNotFound)
}

// ExecutionCounts returns, by tenant, the one-shot executions recorded
// as running and the executions recorded since the time; tenants with
// neither are left out.
func (db *DB) ExecutionCounts(ctx context.Context, since time.Time) (map[string]airlock.ExecutionCounts, error) {
	ctx, done := db.bound(ctx)
	defer done()
	rows, err := db.read.QueryContext(ctx, `SELECT tenant_id,
			count(*) FILTER (WHERE status = 'running' AND session_id = ''),
			count(*) FILTER (WHERE created_at >= $1)
		FROM executions WHERE (status = 'running' AND session_id = '') OR created_at >= $1
		GROUP BY tenant_id`, nanos(since))
	if err != nil {
		return nil, db.wrap(ctx, "count executions", err)
	}
	defer rows.Close()
	out := map[string]airlock.ExecutionCounts{}
	for rows.Next() {
		var tenant string
		var c airlock.ExecutionCounts
		if err := rows.Scan(&tenant, &c.RunningOneShot, &c.Since); err != nil {
			return nil, db.wrap(ctx, "count executions", err)
		}
		out[tenant] = c
	}
	return out, db.wrap(ctx, "count executions", rows.Err())
}

// encodeSample stores a run's last sample as JSON; "" for none.
func encodeSample(m *airlock.MetricSample) string {
	if m == nil {
		return ""
	}
	b, err := json.Marshal(m)
	if err != nil {
		return ""
	}
	return string(b)
}

// decodeSample reads what encodeSample wrote; nil for none (or what does
// not parse).
func decodeSample(s string) *airlock.MetricSample {
	if s == "" {
		return nil
	}
	var m airlock.MetricSample
	if json.Unmarshal([]byte(s), &m) != nil {
		return nil
	}
	return &m
}
