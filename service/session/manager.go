package session

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/service/provision"
)

// Manager runs the sessions of this node. It is safe for concurrent use.
type Manager struct {
	cfg Config

	mu     sync.Mutex
	live   map[string]*live // by session ID, creating to destroying
	closed bool

	stop     chan struct{}
	stopOnce sync.Once
	wg       sync.WaitGroup

	keep keepState // pauses and resumes (keep.go)

	events eventQueue // lifecycle events waiting to be written (events.go)

	pausedPTYs pausedPTYs // the terminals of paused sessions (pty.go)
}

var _ airlock.SessionService = (*Manager)(nil)

// live is a session this process holds a sandbox for.
type live struct {
	mu       sync.Mutex
	rec      airlock.Session  // the record as last written (State is the truth)
	lease    *provision.Lease // nil while creating
	inflight int              // calls running now
	uploads  int              // of them, PutFile calls
	procs    map[int]*running
	contexts map[string]*codeContext
	ptys     *ptyTable     // terminals; see pty.go (kept across a pause)
	ended    chan struct{} // closed once the session is final
	// detached is closed when the server lets go of the session's
	// sandbox at a clean stop: calls end, programs go on.
	detached     chan struct{}
	detachedOnce sync.Once
	// unwatch is closed when the session's sandbox is let go of on
	// purpose (pause): its end is then no failure. pausing refuses calls
	// meanwhile.
	unwatch chan struct{}
	pausing bool
	// pausedBy and resumedBy say why it was last paused (request,
	// timeout, idle) and resumed (request, auto), for its events.
	pausedBy, resumedBy string
}

// sb is the session's sandbox (nil while creating).
func (l *live) sb() airlock.Sandbox {
	if l.lease == nil {
		return nil
	}
	return l.lease.Sandbox()
}

// running is an exec in progress, for signals and GET.
type running struct {
	p           airlock.Process
	executionID string
	started     time.Time
}

// New returns a manager and starts its reaper. Call Recover before
// serving, and Close or Detach at shutdown.
func New(cfg Config) (*Manager, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	m := &Manager{
		cfg:  cfg,
		live: map[string]*live{},
		stop: make(chan struct{}),
	}
	m.startEvents()
	m.wg.Add(1)
	go m.reaper()
	if cfg.Metrics != nil {
		m.wg.Add(1)
		go m.sampler()
	}
	return m, nil
}

func newLive(rec airlock.Session) *live {
	return &live{
		rec:      rec,
		procs:    map[int]*running{},
		contexts: map[string]*codeContext{},
		ptys:     &ptyTable{},
		ended:    make(chan struct{}),
		detached: make(chan struct{}),
		unwatch:  make(chan struct{}),
	}
}

// shutdown refuses new requests and stops the reaper; it returns the
// sessions held now.
func (m *Manager) shutdown() []*live {
	m.mu.Lock()
	m.closed = true
	all := make([]*live, 0, len(m.live))
	for _, l := range m.live {
		all = append(all, l)
	}
	m.mu.Unlock()
	m.stopOnce.Do(func() { close(m.stop) })
	m.wg.Wait()
	return all
}

// Close stops the reaper and destroys every live session (end reason
// shutdown). New requests are refused from the start of Close.
func (m *Manager) Close(ctx context.Context) error {
	all := m.shutdown()
	err := m.each(all, func(l *live) error {
		return m.destroy(ctx, l, airlock.SessionDestroyed, airlock.EndShutdown, "the server shut down")
	})
	m.pausedPTYs.endAll(errServerStopped)
	m.flushEvents(ctx)
	return err
}

// Detach stops the reaper and lets go of every live session without
// ending it: calls running now end with a server-restarting problem, the
// programs they started go on (their records stay open for the next
// start to adopt), and the sandboxes keep running for the next start to
// reattach (Recover). Sessions still being made are destroyed. A session
// whose backend cannot outlive the server is destroyed (end reason
// shutdown). New requests are refused from the start of Detach.
func (m *Manager) Detach(ctx context.Context) error {
	all := m.shutdown()
	defer m.flushEvents(ctx)
	defer m.pausedPTYs.endAll(errServerStopped)
	return m.each(all, func(l *live) error {
		l.mu.Lock()
		state := l.rec.State
		l.mu.Unlock()
		if state == airlock.SessionCreating || !state.Live() {
			return m.destroy(ctx, l, airlock.SessionDestroyed, airlock.EndShutdown, "the server shut down while the session was being made")
		}
		l.detachedOnce.Do(func() { close(l.detached) })
		if err := l.lease.Detach(ctx); err != nil {
			if errors.Is(err, airlock.ErrCannotDetach) {
				m.cfg.Logger.Warn("a session's sandbox cannot outlive the server; it was ended", "session", l.rec.ID, "backend", l.lease.BackendName())
				return m.endDetached(ctx, l, airlock.EndShutdown, "the server shut down and the session's backend cannot keep a sandbox without it")
			}
			return err
		}
		m.forget(l)
		return nil
	})
}

// endDetached records the end of a session whose sandbox is already gone
// (destroyed by a failed Detach).
func (m *Manager) endDetached(ctx context.Context, l *live, reason, detail string) error {
	l.mu.Lock()
	l.rec.EndReason, l.rec.EndDetail = reason, detail
	m.move(ctx, l, airlock.SessionDestroying)
	l.mu.Unlock()
	return m.finish(ctx, l, nil, airlock.SessionDestroyed)
}

// forget drops a session from this process (its record stays as it is).
func (m *Manager) forget(l *live) {
	m.mu.Lock()
	delete(m.live, l.rec.ID)
	m.mu.Unlock()
}

// each runs f for every session at once and joins the errors.
func (m *Manager) each(all []*live, f func(*live) error) error {
	var wg sync.WaitGroup
	errc := make(chan error, len(all))
	for _, l := range all {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errc <- f(l)
		}()
	}
	wg.Wait()
	close(errc)
	var errs []error
	for err := range errc {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Errors of the session API.

func notFound(id string) error {
	return &airlock.Error{Code: airlock.ENOTFOUND, Type: "session-not-found", Message: fmt.Sprintf("no session %s", id), Err: airlock.ErrNotFound}
}

func ended(s *airlock.Session) error {
	why := s.EndReason
	if why == "" {
		why = string(s.State)
	}
	if lim := airlock.SessionLimitOf(s.EndReason); lim != "" {
		why += ", limit " + lim
	}
	if s.EndDetail != "" {
		why += ": " + s.EndDetail
	}
	return airlock.Problem(airlock.ECONFLICT, "session-ended", "session %s has ended (%s)", s.ID, why)
}

func shuttingDown() error {
	return airlock.Problem(airlock.EUNAVAILABLE, provision.ProblemShuttingDown, "the server is shutting down; retry in a moment").RetryLater(5 * time.Second)
}

// lookup returns the tenant's live session, or the error for one that is
// missing, another tenant's (the same not-found) or ended.
func (m *Manager) lookup(ctx context.Context, tenant *airlock.Tenant, id string) (*live, error) {
	m.mu.Lock()
	l, closed := m.live[id], m.closed
	m.mu.Unlock()
	if l != nil {
		l.mu.Lock()
		owner := l.rec.TenantID
		l.mu.Unlock()
		if owner != tenant.ID {
			return nil, notFound(id)
		}
		return l, nil
	}
	s, err := m.cfg.Sessions.Session(ctx, tenant.ID, id)
	if airlock.ErrorCode(err) == airlock.ENOTFOUND {
		return nil, notFound(id)
	}
	if err != nil {
		return nil, err
	}
	if s.State == airlock.SessionPaused {
		return nil, pausedProblem(id)
	}
	if s.State.Live() {
		if closed {
			return nil, shuttingDown()
		}
		// Recorded live but not held by this process: left by an earlier
		// run and not (yet) recovered.
		return nil, airlock.Problem(airlock.EUNAVAILABLE, "session-unavailable", "session %s is not held by this server", id).RetryLater(5 * time.Second)
	}
	return nil, ended(s)
}

// begin starts a call in the tenant's session: the session must be ready
// or busy (a paused one with auto_resume is resumed first); it is busy
// until the returned end is called.
func (m *Manager) begin(ctx context.Context, tenant *airlock.Tenant, id string) (*live, func(), error) {
	l, err := m.lookupLive(ctx, tenant, id)
	if err != nil {
		return nil, nil, err
	}
	l.mu.Lock()
	switch l.rec.State {
	case airlock.SessionReady, airlock.SessionBusy:
	case airlock.SessionCreating:
		l.mu.Unlock()
		return nil, nil, airlock.Problem(airlock.ECONFLICT, "session-not-ready", "session %s is still being created", id)
	case airlock.SessionPaused: // paused while this call waited
		l.mu.Unlock()
		return nil, nil, pausedProblem(id)
	default:
		rec := l.rec
		l.mu.Unlock()
		return nil, nil, ended(&rec)
	}
	select {
	case <-l.detached:
		l.mu.Unlock()
		return nil, nil, shuttingDown()
	default:
	}
	if l.pausing {
		l.mu.Unlock()
		return nil, nil, airlock.Problem(airlock.ECONFLICT, "session-pausing", "session %s is being paused", id)
	}
	m.enter(ctx, l)
	l.mu.Unlock()
	var once sync.Once
	return l, func() { once.Do(func() { m.end(l) }) }, nil
}

// enter counts a call in (l.mu held): the session is busy while any runs.
func (m *Manager) enter(ctx context.Context, l *live) {
	l.inflight++
	l.rec.LastActiveAt = m.cfg.Now().UTC()
	if l.rec.State == airlock.SessionReady {
		m.move(ctx, l, airlock.SessionBusy)
	}
}

// end finishes a call: usage is brought up to date, and the session is
// ready again once no call runs.
func (m *Manager) end(l *live) {
	var st airlock.Stats
	var stErr error = errors.New("no sandbox")
	if sb := l.sb(); sb != nil {
		st, stErr = sb.Stats(context.Background())
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.inflight--
	l.rec.LastActiveAt = m.cfg.Now().UTC()
	if stErr == nil {
		l.rec.Usage.CPUMS = st.CPUTime.Milliseconds()
		l.rec.Usage.PeakMemoryMB = max(l.rec.Usage.PeakMemoryMB, mib(st.PeakMemoryBytes))
	}
	if l.inflight == 0 && l.rec.State == airlock.SessionBusy && !isClosed(l.detached) {
		m.move(context.Background(), l, airlock.SessionReady)
	}
}

func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

func mib(b int64) int64 { return (b + (1<<20 - 1)) >> 20 }

// move changes a live session's state (l.mu held) and records it. A
// failed write is logged: the in-memory state is the truth while the
// process lives, and the next write carries it.
func (m *Manager) move(ctx context.Context, l *live, next airlock.SessionState) error {
	if err := l.rec.State.Transition(next); err != nil {
		m.cfg.Logger.Error("session state machine refused a move", "session", l.rec.ID, "err", err)
		return err
	}
	prev := l.rec.State
	l.rec.State = next
	m.persist(ctx, l)
	m.emitMove(ctx, l, prev)
	return nil
}

// persist writes a live session's record (l.mu held).
func (m *Manager) persist(ctx context.Context, l *live) {
	rec := l.rec
	rec.Running = nil
	if err := m.cfg.Sessions.UpdateSession(context.WithoutCancel(ctx), &rec); err != nil {
		m.cfg.Logger.Error("record session", "session", rec.ID, "state", rec.State, "err", err)
	}
}

// snapshot returns a copy of a live session's record with what is running
// and the memory in use now.
func (m *Manager) snapshot(ctx context.Context, l *live) *airlock.Session {
	var st airlock.Stats
	var stErr error = errors.New("no sandbox")
	l.mu.Lock()
	sb := l.sb()
	l.mu.Unlock()
	if sb != nil {
		st, stErr = sb.Stats(ctx)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	rec := l.rec
	if stErr == nil && rec.State.Live() {
		rec.Usage.MemoryMB = mib(st.MemoryBytes)
		rec.Usage.CPUMS = st.CPUTime.Milliseconds()
		rec.Usage.PeakMemoryMB = max(rec.Usage.PeakMemoryMB, mib(st.PeakMemoryBytes))
	}
	for pid, r := range l.procs {
		rec.Running = append(rec.Running, airlock.RunningExec{PID: pid, ExecutionID: r.executionID, StartedAt: r.started})
	}
	sort.Slice(rec.Running, func(i, j int) bool { return rec.Running[i].StartedAt.Before(rec.Running[j].StartedAt) })
	return &rec
}

// destroy ends a session: destroying, the sandbox destroyed with
// everything it held, then final (destroyed, or failed). It waits for a
// destroy already under way. It is safe to call more than once.
func (m *Manager) destroy(ctx context.Context, l *live, final airlock.SessionState, reason, detail string) error {
	ctx = context.WithoutCancel(ctx)
	l.mu.Lock()
	switch l.rec.State {
	case airlock.SessionDestroying, airlock.SessionDestroyed, airlock.SessionFailed:
		l.mu.Unlock()
		<-l.ended
		return nil
	case airlock.SessionCreating:
		// The creator finishes the job once the sandbox is up (or not).
		l.rec.EndReason, l.rec.EndDetail = reason, detail
		m.move(ctx, l, airlock.SessionDestroying)
		l.mu.Unlock()
		<-l.ended
		return nil
	}
	l.rec.EndReason, l.rec.EndDetail = reason, detail
	m.move(ctx, l, airlock.SessionDestroying)
	lease := l.lease
	l.mu.Unlock()
	return m.finish(ctx, l, lease, final)
}

// finish destroys the sandbox of a destroying session and makes it final.
func (m *Manager) finish(ctx context.Context, l *live, lease *provision.Lease, final airlock.SessionState) error {
	var err error
	if lease != nil {
		if st, serr := lease.Sandbox().Stats(ctx); serr == nil {
			l.mu.Lock()
			l.rec.Usage.CPUMS = st.CPUTime.Milliseconds()
			l.rec.Usage.PeakMemoryMB = max(l.rec.Usage.PeakMemoryMB, mib(st.PeakMemoryBytes))
			l.mu.Unlock()
		}
		err = lease.Destroy(ctx)
	}
	if err == nil {
		// With the sandbox gone nothing writes the volumes any more; a
		// sandbox not removed keeps its claims for the next start.
		m.detachVolumes(ctx, l.rec.ID)
	}
	l.mu.Lock()
	if err != nil {
		final = airlock.SessionFailed
		l.rec.EndDetail = joinDetail(l.rec.EndDetail, "the sandbox could not be removed cleanly; the node's reconciler removes what is left at its next start")
		m.cfg.Logger.Error("destroy session sandbox", "session", l.rec.ID, "err", err)
	}
	now := m.cfg.Now().UTC()
	l.rec.EndedAt = &now
	m.move(ctx, l, final)
	l.mu.Unlock()
	m.forget(l)
	l.ptys.endAll(errSessionEnded)
	close(l.ended)
	return err
}

// sandboxLimits are the limits of a session's sandbox.
func sandboxLimits(s airlock.SessionLimits) airlock.Limits {
	return airlock.Limits{CPUs: s.CPUs, MemoryBytes: s.MemoryBytes, DiskBytes: s.DiskBytes, Pids: s.Pids, OutputBytes: s.OutputBytes,
		Timeout: time.Duration(s.TimeoutS) * time.Second}
}

func joinDetail(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}

// watch fails a session whose sandbox exits on its own.
func (m *Manager) watch(l *live) {
	wd := m.cfg.Runner.Watchdog()
	l.mu.Lock()
	sb, unwatch := l.sb(), l.unwatch
	watched := airlock.Watched{Sandbox: sb, TenantID: l.rec.TenantID, SessionID: l.rec.ID, Limits: sandboxLimits(l.rec.Limits)}
	l.mu.Unlock()
	defer wd.Watch(watched)()
	select {
	case <-sb.Done():
	case <-l.ended:
		return
	case <-l.detached:
		return
	case <-unwatch:
		return
	}
	reason, detail := airlock.EndSandboxExited, "the sandbox exited on its own"
	if st, err := sb.Stats(context.Background()); err == nil && st.OOMKilled {
		reason, detail = airlock.EndOutOfMemory, fmt.Sprintf("the sandbox as a whole ran out of memory (peak %d MiB of its %d MiB limit) and was killed",
			mib(st.PeakMemoryBytes), mib(watched.Limits.MemoryBytes))
	}
	if k := wd.KilledBy(sb.ID()); k != "" {
		reason, detail = k, "an abuse detector killed the sandbox (GET /v1/events says what it saw)"
	}
	m.destroy(context.Background(), l, airlock.SessionFailed, reason, detail)
}

// reaper ends sessions past their timeout or idle timeout, and drops
// expired idempotency keys.
func (m *Manager) reaper() {
	defer m.wg.Done()
	t := time.NewTicker(m.cfg.ReapInterval)
	defer t.Stop()
	for {
		select {
		case <-m.stop:
			return
		case <-t.C:
			m.Reap(context.Background())
		}
	}
}

// Reap does one round of the reaper now and returns how many sessions it
// ended.
func (m *Manager) Reap(ctx context.Context) int {
	now := m.cfg.Now()
	m.mu.Lock()
	all := make([]*live, 0, len(m.live))
	for _, l := range m.live {
		all = append(all, l)
	}
	m.mu.Unlock()
	n := 0
	for _, l := range all {
		l.mu.Lock()
		st, expires := l.rec.State, l.rec.ExpiresAt
		idleAt := l.rec.LastActiveAt.Add(time.Duration(l.rec.Limits.IdleTimeoutS) * time.Second)
		idle := st == airlock.SessionReady && l.inflight == 0 && !now.Before(idleAt)
		pausing := l.pausing
		l.mu.Unlock()
		switch {
		case st != airlock.SessionReady && st != airlock.SessionBusy, pausing:
		case !now.Before(expires):
			if m.timedOut(ctx, l, airlock.PauseByTimeout) {
				continue
			}
			m.destroy(ctx, l, airlock.SessionDestroyed, airlock.EndTimeout, "its timeout passed")
			n++
		case idle:
			if m.timedOut(ctx, l, airlock.PauseByIdle) {
				continue
			}
			m.destroy(ctx, l, airlock.SessionDestroyed, airlock.EndIdle, fmt.Sprintf("nothing ran for %ds", l.rec.Limits.IdleTimeoutS))
			n++
		}
	}
	n += m.reapPaused(ctx, now)
	if k, err := m.cfg.Sessions.DeleteExpiredIdempotencyKeys(ctx, now); err != nil {
		m.cfg.Logger.Error("drop expired idempotency keys", "err", err)
	} else if k > 0 {
		m.cfg.Logger.Debug("dropped expired idempotency keys", "count", k)
	}
	return n
}
