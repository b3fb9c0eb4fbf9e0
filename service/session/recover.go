package session

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/agent/protocol"
	"github.com/airlockhq/airlock/service/run"
)

// Recovery says what Recover did.
type Recovery struct {
	Reattached  int // live sessions taken back with their sandboxes
	Ended       int // sessions recorded as ended (see their end reasons)
	Adopted     int // programs that ran on and whose records continue
	Interrupted int // runs recorded as interrupted
	Paused      int // paused sessions left paused, for a resume
}

// recoverParallel is how many sessions are reattached at once.
const recoverParallel = 8

// Recover takes back the sessions an earlier run of the server left live
// in the store. Call it once at start, before the node's reconciler ends
// the sandboxes nobody holds, and before serving.
//
// A live session is reattached: its backend finds its sandbox by ID and
// connects to its agent again (the agent kept running when the old
// server died and waits for a host), its network is served again, its
// code contexts are listed by the agent, and it goes on with the same ID,
// files, interpreter state, limits and deadlines. A program that was
// running is adopted when the agent kept it (its record continues, with
// the output from its start and its exit status); a run the agent kept
// nothing of (a cell, say) is recorded as interrupted. A session whose
// sandbox cannot be reattached is ended (end reason server_restarted,
// with why), as is one that was still being created (failed; its
// idempotency key is freed for a retry) or being destroyed. Its
// terminals are taken back too (pty.go). Before all that, the events of
// transitions that a crash of the previous run lost are written
// (events_recover.go).
func (m *Manager) Recover(ctx context.Context) (Recovery, error) {
	m.recoverEvents(ctx) // first: the feed keeps each session's order
	left, err := m.cfg.Sessions.LiveSessions(ctx)
	if err != nil {
		return Recovery{}, err
	}
	var claims map[string][]airlock.VolumeMount
	if m.cfg.Volumes != nil {
		if claims, err = m.cfg.Volumes.Claims(ctx); err != nil {
			return Recovery{}, err
		}
	}
	var (
		mu   sync.Mutex
		rep  Recovery
		errs []error
		wg   sync.WaitGroup
		sem  = make(chan struct{}, recoverParallel)
	)
	for _, s := range left {
		m.mu.Lock()
		_, ours := m.live[s.ID]
		m.mu.Unlock()
		if ours {
			continue
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			s.Volumes = claims[s.ID]
			r, err := m.recoverOne(ctx, s)
			mu.Lock()
			defer mu.Unlock()
			rep.Reattached += r.Reattached
			rep.Ended += r.Ended
			rep.Adopted += r.Adopted
			rep.Interrupted += r.Interrupted
			rep.Paused += r.Paused
			if err != nil {
				errs = append(errs, fmt.Errorf("session %s: %w", s.ID, err))
			}
		}()
	}
	wg.Wait()
	if m.cfg.Volumes != nil {
		// The claims of sessions that did not come back are released,
		// and their volumes unmounted.
		if err := m.cfg.Volumes.Recover(ctx, func(id string) bool {
			m.mu.Lock()
			defer m.mu.Unlock()
			_, ok := m.live[id]
			return ok
		}); err != nil {
			errs = append(errs, fmt.Errorf("volumes: %w", err))
		}
	}
	if rep.Reattached > 0 || rep.Ended > 0 {
		m.cfg.Logger.Info("sessions an earlier run left were recovered",
			"reattached", rep.Reattached, "ended", rep.Ended, "adopted", rep.Adopted, "interrupted", rep.Interrupted)
	}
	return rep, errors.Join(errs...)
}

func (m *Manager) recoverOne(ctx context.Context, s *airlock.Session) (Recovery, error) {
	switch s.State {
	case airlock.SessionCreating:
		return Recovery{Ended: 1}, m.endRecord(ctx, s, airlock.SessionFailed, "the server restarted while the session was being created")
	case airlock.SessionDestroying:
		return Recovery{Ended: 1}, m.endRecord(ctx, s, airlock.SessionDestroyed, "")
	case airlock.SessionPaused:
		// Saved on disk with no sandbox: it waits for a resume (keep.go).
		return Recovery{Paused: 1}, nil
	}
	tenant, err := m.cfg.Store.TenantByID(ctx, s.TenantID)
	switch {
	case airlock.ErrorCode(err) == airlock.ENOTFOUND:
		return Recovery{Ended: 1}, m.endRecord(ctx, s, airlock.SessionDestroyed, "the server restarted and the session's tenant no longer exists")
	case err != nil:
		// The store failed: leave the sandbox alone (the start stops
		// before the reconciler runs) for a start that can read it.
		return Recovery{}, err
	}
	var network *airlock.NetworkRequest
	if s.Network.HasNetwork() || len(s.BrokerScopes) > 0 {
		network = &airlock.NetworkRequest{TenantID: s.TenantID, SessionID: s.ID, Policy: s.Network, BrokerScopes: s.BrokerScopes}
	}
	sandboxID := s.SandboxID
	if sandboxID == "" {
		sandboxID = "ss-" + s.ID
	}
	lease, err := m.cfg.Provisioner.Reattach(ctx, tenant, s.Backend, sandboxID, s.StartSource,
		airlock.Limits{CPUs: s.Limits.CPUs, MemoryBytes: s.Limits.MemoryBytes}, network)
	if err != nil {
		m.cfg.Logger.Warn("a session's sandbox could not be reattached; the session is ended", "session", s.ID, "err", err)
		return Recovery{Ended: 1}, m.endRecord(ctx, s, airlock.SessionDestroyed,
			"the server restarted and the session's sandbox could not be reattached: "+airlock.ErrorMessage(err))
	}
	l := newLive(*s)
	l.lease = lease
	if l.rec.State == airlock.SessionBusy {
		l.rec.State = airlock.SessionReady // adopted programs make it busy again
	}
	agent := lease.Sandbox().Agent()
	if infos, err := agent.ListContexts(ctx); err != nil {
		m.cfg.Logger.Warn("the reattached agent did not list its code contexts", "session", s.ID, "err", err)
	} else {
		for _, c := range infos {
			l.contexts[c.ID] = &codeContext{rec: airlock.CodeContext{
				ID: c.ID, SessionID: s.ID, Language: airlock.ContextLanguage(c.Language), State: c.State,
				Runs: c.Runs, CreatedAt: time.UnixMilli(c.CreatedAtMS).UTC(),
			}}
		}
	}
	// Its terminals: retained programs tagged with their PTY IDs.
	m.adoptPTYs(ctx, l, tenant)
	procs, err := agent.Processes(ctx)
	if err != nil {
		m.cfg.Logger.Warn("the reattached agent did not list its programs", "session", s.ID, "err", err)
	}
	kept := map[string]protocol.ProcessInfo{}
	for _, p := range procs {
		if p.Tag != "" {
			kept[p.Tag] = p
		}
	}
	runs, err := m.cfg.Store.RunningExecutions(ctx, s.ID)
	if err != nil {
		// As above: the sandbox stays, for a start whose store answers.
		if derr := lease.Detach(ctx); derr != nil {
			m.cfg.Logger.Warn("letting go of a reattached sandbox", "session", s.ID, "err", derr)
		}
		return Recovery{}, err
	}
	m.mu.Lock()
	m.live[s.ID] = l
	m.mu.Unlock()
	rep := Recovery{Reattached: 1}
	l.mu.Lock()
	m.persist(ctx, l)
	l.mu.Unlock()
	for _, e := range runs {
		p, ok := kept[e.ID]
		if !ok {
			rep.Interrupted++
			m.cfg.Runner.Fail(ctx, e, errors.New("interrupted: the server restarted while this ran and the sandbox kept no result of it; the session lives on"))
			continue
		}
		rep.Adopted++
		m.adopt(l, e, p)
	}
	go m.watch(l)
	return rep, nil
}

// adopt follows a program that ran on through a restart to its end and
// finishes its record; the session is busy meanwhile.
func (m *Manager) adopt(l *live, e *airlock.Execution, p protocol.ProcessInfo) {
	l.mu.Lock()
	m.enter(context.Background(), l)
	out := l.rec.Limits.OutputBytes
	l.mu.Unlock()
	timeout := time.Duration(p.TimeoutMS) * time.Millisecond
	if timeout <= 0 {
		timeout = m.cfg.MaxExecTimeout
	}
	go func() {
		defer m.end(l)
		_, err := m.cfg.Runner.Run(context.Background(), e, run.Job{
			Target:    l.lease,
			AttachPID: p.PID,
			Program:   run.Program{Timeout: timeout, OutputBytes: out, Retain: true},
			Started:   m.tracker(l),
			Ended:     l.ended,
			Detached:  l.detached,
		})
		if err != nil {
			m.cfg.Logger.Warn("an adopted program did not finish cleanly", "session", l.rec.ID, "execution", e.ID, "err", err)
		}
	}()
}

// endRecord ends a session this process does not hold: its sandbox is
// gone or left to the reconciler. final is destroyed or failed; detail,
// if set, says why (server_restarted).
func (m *Manager) endRecord(ctx context.Context, s *airlock.Session, final airlock.SessionState, detail string) error {
	now := m.cfg.Now().UTC()
	if s.State.Live() && final == airlock.SessionDestroyed {
		s.State = airlock.SessionDestroying // the path the state machine allows
	}
	if err := s.State.Transition(final); err != nil {
		return err
	}
	s.State = final
	s.EndedAt = &now
	switch {
	case s.EndReason == "":
		s.EndReason, s.EndDetail = airlock.EndServerRestarted, detail
	case detail == "":
		s.EndDetail = joinDetail(s.EndDetail, "its end was completed after a restart of the server")
	default:
		s.EndDetail = joinDetail(s.EndDetail, detail)
	}
	if err := m.cfg.Sessions.UpdateSession(ctx, s); err != nil {
		return err
	}
	m.emitEnded(ctx, s)
	if final == airlock.SessionFailed && s.IdempotencyKey != "" {
		return m.cfg.Sessions.ReleaseIdempotencyKey(ctx, s.TenantID, s.IdempotencyKey, s.ID)
	}
	return nil
}
