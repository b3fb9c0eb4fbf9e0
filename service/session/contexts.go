package session

import (
	"context"
	"errors"
	"sort"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/agent/protocol"
	"github.com/airlockhq/airlock/service/run"
)

// codeContext is a code context of a live session.
type codeContext struct {
	rec airlock.CodeContext
}

func contextNotFound(sessionID, cid string) error {
	return airlock.Problem(airlock.ENOTFOUND, "context-not-found", "no context %s in session %s", cid, sessionID)
}

// contextError turns an agent's refusal of a context request into an API
// error.
func (m *Manager) contextError(l *live, cid string, err error) error {
	var re *protocol.RemoteError
	if !errors.As(err, &re) {
		return m.failure(l, err)
	}
	switch re.Code {
	case "not_found":
		return contextNotFound(l.rec.ID, cid)
	case "context_dead":
		return airlock.Problem(airlock.ECONFLICT, "context-dead", "the interpreter of context %s has died; restart it (POST .../contexts/%s/restart)", cid, cid)
	case "too_many":
		return airlock.Problem(airlock.ECONFLICT, "too-many-contexts", "a session holds at most %d contexts; delete one first", protocol.MaxContexts)
	case "start_failed":
		return airlock.Problem(airlock.EUNAVAILABLE, "context-start-failed", "the interpreter did not start: %s", re.Message)
	}
	return &airlock.Error{Code: airlock.EINTERNAL, Message: "context request failed", Err: err}
}

// CreateContext starts a persistent interpreter in the tenant's session.
func (m *Manager) CreateContext(ctx context.Context, tenant *airlock.Tenant, id string, req airlock.CreateContextRequest) (*airlock.CodeContext, error) {
	if !req.Language.Valid() {
		return nil, airlock.Problem(airlock.EINVALID, "unknown-language", "unknown context language %q (one of python, node)", req.Language)
	}
	l, end, err := m.begin(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	defer end()
	l.mu.Lock()
	if len(l.contexts) >= protocol.MaxContexts {
		l.mu.Unlock()
		return nil, airlock.Problem(airlock.ECONFLICT, "too-many-contexts", "a session holds at most %d contexts; delete one first", protocol.MaxContexts)
	}
	mem := l.rec.Limits.ProcessMemoryBytes
	l.mu.Unlock()
	// A sandbox from the pool holds a Python context started and idle
	// (provision.Recipe.Context): the first one asked for takes it.
	known := func(id string) bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		_, ok := l.contexts[id]
		return ok
	}
	cid, err := l.lease.TakeReadyContext(ctx, string(req.Language), known)
	if err != nil {
		return nil, m.failure(l, err)
	}
	if cid == "" {
		cid = "ctx-" + m.cfg.NewID()[:16]
		if _, err := l.sb().Agent().CreateContext(ctx, protocol.ContextRequest{ID: cid, Language: string(req.Language), MemoryLimitBytes: mem}); err != nil {
			return nil, m.contextError(l, cid, err)
		}
	}
	c := &codeContext{rec: airlock.CodeContext{
		ID: cid, SessionID: id, Language: req.Language, State: airlock.ContextIdle, CreatedAt: m.cfg.Now().UTC(),
	}}
	l.mu.Lock()
	l.contexts[cid] = c
	rec := c.rec
	l.mu.Unlock()
	return &rec, nil
}

// ListContexts lists the code contexts of the tenant's session.
func (m *Manager) ListContexts(ctx context.Context, tenant *airlock.Tenant, id string) ([]*airlock.CodeContext, error) {
	l, err := m.lookupLive(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.rec.State.Live() {
		rec := l.rec
		return nil, ended(&rec)
	}
	out := make([]*airlock.CodeContext, 0, len(l.contexts))
	for _, c := range l.contexts {
		rec := c.rec
		out = append(out, &rec)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].CreatedAt.Before(out[j].CreatedAt) })
	return out, nil
}

// context returns a context of a session in a call (l.mu not held).
func (m *Manager) context(l *live, cid string) (*codeContext, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	c := l.contexts[cid]
	if c == nil {
		return nil, contextNotFound(l.rec.ID, cid)
	}
	return c, nil
}

// DeleteContext ends a code context and its interpreter.
func (m *Manager) DeleteContext(ctx context.Context, tenant *airlock.Tenant, id, cid string) error {
	l, end, err := m.begin(ctx, tenant, id)
	if err != nil {
		return err
	}
	defer end()
	if _, err := m.context(l, cid); err != nil {
		return err
	}
	if err := l.sb().Agent().CloseContext(ctx, cid); err != nil {
		var re *protocol.RemoteError
		if !errors.As(err, &re) || re.Code != "not_found" {
			return m.contextError(l, cid, err)
		}
	}
	l.mu.Lock()
	delete(l.contexts, cid)
	l.mu.Unlock()
	return nil
}

// RestartContext replaces a context's interpreter with a fresh one; a
// cell running in it ends.
func (m *Manager) RestartContext(ctx context.Context, tenant *airlock.Tenant, id, cid string) (*airlock.CodeContext, error) {
	l, end, err := m.begin(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	defer end()
	c, err := m.context(l, cid)
	if err != nil {
		return nil, err
	}
	if _, err := l.sb().Agent().RestartContext(ctx, cid); err != nil {
		return nil, m.contextError(l, cid, err)
	}
	l.mu.Lock()
	c.rec.State = airlock.ContextIdle
	rec := c.rec
	l.mu.Unlock()
	return &rec, nil
}

// RunCell runs code in a context of the tenant's session, recorded as an
// execution of the session (language the context's). A cell that raises
// is a result (with its error); one past its timeout is interrupted and
// the context lives on; one whose interpreter dies is a result too, and
// leaves the context dead until it is restarted.
func (m *Manager) RunCell(ctx context.Context, tenant *airlock.Tenant, id, cid string, req airlock.RunCellRequest, obs airlock.CellObserver) (*airlock.CellResult, error) {
	if err := req.Validate(m.cfg.MaxExecTimeout); err != nil {
		return nil, err
	}
	l, end, err := m.begin(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	defer end()
	c, err := m.context(l, cid)
	if err != nil {
		return nil, err
	}
	// The tenant's executions per minute: refused, the cell leaves no
	// record.
	if err := m.cfg.Provisioner.AdmitExec(tenant.ID); err != nil {
		return nil, err
	}
	timeout := m.cfg.ExecTimeout
	if req.TimeoutSec > 0 {
		timeout = time.Duration(req.TimeoutSec) * time.Second
	}
	l.mu.Lock()
	outputBytes, image, lease, lang := l.rec.Limits.OutputBytes, l.rec.Image, l.lease, c.rec.Language
	l.rec.Usage.CellRuns++
	c.rec.Runs++
	c.rec.State = airlock.ContextBusy
	l.mu.Unlock()
	e, err := m.cfg.Runner.Begin(ctx, run.Record{
		TenantID: tenant.ID, SessionID: id, Language: airlock.Language(lang), Image: image, Code: req.Code, Backend: lease.BackendName(),
		Guard: tenant.Guard,
	})
	if err != nil {
		m.setContextState(l, c, airlock.ContextIdle)
		return nil, err
	}
	res, err := m.cfg.Runner.RunCell(ctx, e, run.Cell{
		Target: lease, ContextID: cid, Code: req.Code, Timeout: timeout, OutputBytes: outputBytes,
		Observer: obs, Ended: l.ended, Detached: l.detached, Limits: sandboxLimits(l.rec.Limits),
	})
	state := airlock.ContextIdle
	var re *protocol.RemoteError
	switch {
	case err == nil && res.Died:
		state = airlock.ContextDead
	case errors.As(err, &re) && re.Code == "context_dead":
		state = airlock.ContextDead
	}
	m.setContextState(l, c, state)
	if err != nil {
		switch {
		case errors.Is(err, run.ErrCellStuck):
			return nil, airlock.Problem(airlock.EUNAVAILABLE, "cell-stuck", "the cell did not end %s after its timeout; restart the context", m.cfg.Runner.CellSlack())
		case re != nil:
			return nil, m.contextError(l, cid, err)
		}
		return nil, m.failure(l, err)
	}
	r := &airlock.CellResult{
		ContextID:       cid,
		ExecutionID:     e.ID,
		Value:           res.Value,
		Outputs:         make([]airlock.CellOutput, 0, len(res.Outputs)),
		OutputsDropped:  res.Dropped,
		DurationMS:      res.DurationMS,
		TimedOut:        res.TimedOut,
		EndedBy:         e.EndedBy,
		LimitsHit:       e.LimitsHit,
		ContextState:    state,
		Stdout:          e.Stdout,
		Stderr:          e.Stderr,
		StdoutTruncated: e.StdoutTruncated,
		StderrTruncated: e.StderrTruncated,
		Findings:        e.Findings,
	}
	if res.Error != nil {
		r.Error = &airlock.CellError{Name: res.Error.Name, Value: res.Error.Value, Traceback: res.Error.Traceback}
	}
	for _, o := range res.Outputs {
		r.Outputs = append(r.Outputs, airlock.CellOutput{Type: o.Type, Data: o.Data})
	}
	return r, nil
}

// setContextState sets a context's state unless it was deleted meanwhile.
func (m *Manager) setContextState(l *live, c *codeContext, state string) {
	l.mu.Lock()
	c.rec.State = state
	l.mu.Unlock()
}
