package session

import (
	"context"
	"errors"
	"sort"
	"strings"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/service/run"
)

// execEnv is added to every exec's environment unless the request sets it.
var execEnv = map[string]string{
	"PYTHONUNBUFFERED":        "1", // output streams as it is printed
	"PYTHONDONTWRITEBYTECODE": "1",
}

// Exec runs a command in the tenant's session and returns its result,
// recorded as an execution of the session. obs, if not nil, sees the
// output as it comes. A failing command is a result; an error means the
// session or the service failed.
func (m *Manager) Exec(ctx context.Context, tenant *airlock.Tenant, id string, req airlock.SessionExecRequest, obs airlock.ExecObserver) (*airlock.Execution, error) {
	if err := req.Validate(m.cfg.MaxExecTimeout); err != nil {
		return nil, err
	}
	l, end, err := m.begin(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	defer end()
	// The tenant's executions per minute: refused, the exec leaves no
	// record.
	if err := m.cfg.Provisioner.AdmitExec(tenant.ID); err != nil {
		return nil, err
	}
	timeout := m.cfg.ExecTimeout
	if req.TimeoutSec > 0 {
		timeout = time.Duration(req.TimeoutSec) * time.Second
	}
	argv, lang := req.Cmd, airlock.Command
	code, checked := strings.Join(req.Cmd, "\x00"), req.Cmd // the guard checks the argv as it is
	if req.Shell != "" {
		argv, lang, code, checked = []string{"bash", "-c", req.Shell}, airlock.Bash, req.Shell, nil
	}
	env := make([]string, 0, len(req.Env)+len(execEnv))
	for k, v := range execEnv {
		if _, set := req.Env[k]; !set {
			env = append(env, k+"="+v)
		}
	}
	for k, v := range req.Env {
		env = append(env, k+"="+v)
	}
	sort.Strings(env)
	var stdin []byte
	if req.Stdin != "" {
		stdin = []byte(req.Stdin)
	}

	l.mu.Lock()
	limits, image, lease := l.rec.Limits, l.rec.Image, l.lease
	l.rec.Usage.Execs++
	l.mu.Unlock()
	e, err := m.cfg.Runner.Begin(ctx, run.Record{
		TenantID: tenant.ID, SessionID: id, Language: lang, Image: image, Code: code, Argv: checked, Backend: lease.BackendName(),
		Guard: tenant.Guard,
	})
	if err != nil {
		return nil, err
	}
	e, err = m.cfg.Runner.Run(ctx, e, m.execJob(l, lease, run.Program{
		Argv:             argv,
		Env:              env,
		Cwd:              req.Cwd,
		Stdin:            stdin,
		KeepStdin:        req.KeepStdin,
		Timeout:          timeout,
		OutputBytes:      limits.OutputBytes,
		MemoryLimitBytes: limits.ProcessMemoryBytes,
		Retain:           true,
	}, obs))
	if err != nil {
		return nil, m.failure(l, err)
	}
	return e, nil
}

// execJob is the run of a program in a session: it is listed as running
// (for GET and signals) while it runs, ends with the session, and lives
// on when the server detaches.
func (m *Manager) execJob(l *live, target run.Target, p run.Program, obs airlock.ExecObserver) run.Job {
	return run.Job{
		Target:   target,
		Program:  p,
		Limits:   sandboxLimits(l.rec.Limits),
		Observer: obs,
		Started:  m.tracker(l),
		Ended:    l.ended,
		Detached: l.detached,
	}
}

// tracker returns the Started hook that lists a session's running
// program; the program is dropped from the list when it ends.
func (m *Manager) tracker(l *live) func(pid int, executionID string, p airlock.Process) {
	return func(pid int, executionID string, p airlock.Process) {
		if pid <= 0 {
			return
		}
		l.mu.Lock()
		l.procs[pid] = &running{p: p, executionID: executionID, started: time.Now()}
		l.mu.Unlock()
		go func() {
			select {
			case <-p.Done():
			case <-l.ended:
			}
			l.mu.Lock()
			if r := l.procs[pid]; r != nil && r.p == p {
				delete(l.procs, pid)
			}
			l.mu.Unlock()
		}()
	}
}

// failure is the API error of a call that failed because of its session:
// session-ended if the session ended meanwhile, else what went wrong.
func (m *Manager) failure(l *live, err error) error {
	if errors.Is(err, run.ErrEnded) {
		<-l.ended
	}
	select {
	case <-l.ended:
	default:
		if sb := l.sb(); sb != nil {
			select {
			case <-sb.Done():
				// The sandbox died; let the watcher record why before we
				// answer.
				select {
				case <-l.ended:
				case <-time.After(10 * time.Second):
				}
			default:
			}
		}
	}
	l.mu.Lock()
	rec := l.rec
	l.mu.Unlock()
	if !rec.State.Live() {
		return ended(&rec)
	}
	var ae *airlock.Error
	if errors.As(err, &ae) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return &airlock.Error{Code: airlock.EUNAVAILABLE, Type: "sandbox-failed", Message: "the session's sandbox did not answer", Err: err}
}

// SignalExec delivers a signal to the process group of a program running
// in the tenant's session.
func (m *Manager) SignalExec(ctx context.Context, tenant *airlock.Tenant, id string, pid, sig int) error {
	if sig < 1 || sig > 64 {
		return airlock.Problem(airlock.EINVALID, "invalid-signal", "signal %d is not between 1 and 64", sig)
	}
	l, err := m.lookup(ctx, tenant, id)
	if err != nil {
		return err
	}
	l.mu.Lock()
	r := l.procs[pid]
	state := l.rec
	l.mu.Unlock()
	if !state.State.Live() {
		return ended(&state)
	}
	if r == nil {
		return airlock.Problem(airlock.ENOTFOUND, "process-not-found", "no exec with pid %d is running in session %s", pid, id)
	}
	if err := r.p.Signal(sig); err != nil {
		return m.failure(l, err)
	}
	return nil
}
