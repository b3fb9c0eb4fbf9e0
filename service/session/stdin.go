package session

import (
	"context"
	"errors"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/agent/protocol"
)

// runningExec returns the program of that PID running in the tenant's
// session.
func (m *Manager) runningExec(ctx context.Context, tenant *airlock.Tenant, id string, pid int) (*live, *running, error) {
	l, err := m.lookup(ctx, tenant, id)
	if err != nil {
		return nil, nil, err
	}
	l.mu.Lock()
	r := l.procs[pid]
	state := l.rec
	l.mu.Unlock()
	if !state.State.Live() {
		return nil, nil, ended(&state)
	}
	if r == nil {
		return nil, nil, airlock.Problem(airlock.ENOTFOUND, "process-not-found", "no exec with pid %d is running in session %s", pid, id)
	}
	return l, r, nil
}

func (m *Manager) stdinError(l *live, err error) error {
	if errors.Is(err, protocol.ErrNoStdin) {
		return airlock.Problem(airlock.ECONFLICT, "stdin-closed", "the program's stdin is closed (it was started before the server restarted)")
	}
	return m.failure(l, err)
}

// WriteStdin writes to the stdin of a program running in the tenant's
// session. The program must have been started with KeepStdin; else its
// stdin is empty and what is written is dropped.
func (m *Manager) WriteStdin(ctx context.Context, tenant *airlock.Tenant, id string, pid int, b []byte) error {
	if len(b) > airlock.MaxStdinBytes {
		return airlock.Problem(airlock.ETOOLARGE, "stdin-too-large", "stdin is %d bytes; the limit of one write is %d", len(b), airlock.MaxStdinBytes)
	}
	l, r, err := m.runningExec(ctx, tenant, id, pid)
	if err != nil {
		return err
	}
	if _, err := r.p.Write(b); err != nil {
		return m.stdinError(l, err)
	}
	return nil
}

// CloseStdin closes the stdin of a program running in the tenant's
// session.
func (m *Manager) CloseStdin(ctx context.Context, tenant *airlock.Tenant, id string, pid int) error {
	l, r, err := m.runningExec(ctx, tenant, id, pid)
	if err != nil {
		return err
	}
	if err := r.p.CloseStdin(); err != nil {
		return m.stdinError(l, err)
	}
	return nil
}
