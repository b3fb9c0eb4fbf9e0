package session

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/protocol"
)

// killGrace is how long past an exec's timeout the host waits for the
// agent's own kill to be reported before it kills the process itself.
const killGrace = 2 * time.Second

// execEnv is added to every exec's environment unless the request sets it.
var execEnv = map[string]string{
	"PYTHONUNBUFFERED":        "1", // output streams as it is printed
	"PYTHONDONTWRITEBYTECODE": "1",
}

// capture keeps the first max bytes of a stream and passes every chunk to
// an observer.
type capture struct {
	mu        sync.Mutex
	max       int64
	buf       []byte
	truncated bool
	observe   func([]byte)
}

func (c *capture) Write(b []byte) (int, error) {
	c.mu.Lock()
	room := c.max - int64(len(c.buf))
	switch {
	case int64(len(b)) <= room:
		c.buf = append(c.buf, b...)
	case room > 0:
		c.buf = append(c.buf, b[:room]...)
		c.truncated = true
	default:
		c.truncated = true
	}
	c.mu.Unlock()
	if c.observe != nil {
		c.observe(b)
	}
	return len(b), nil
}

func (c *capture) result() (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return string(c.buf), c.truncated
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
	timeout := m.cfg.ExecTimeout
	if req.TimeoutSec > 0 {
		timeout = time.Duration(req.TimeoutSec) * time.Second
	}
	argv, lang := req.Cmd, airlock.Command
	code := strings.Join(req.Cmd, "\x00")
	if req.Shell != "" {
		argv, lang, code = []string{"bash", "-c", req.Shell}, airlock.Bash, req.Shell
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

	l.mu.Lock()
	limits, image, sb := l.rec.Limits, l.rec.Image, l.sb
	l.rec.Usage.Execs++
	l.mu.Unlock()
	sum := sha256.Sum256([]byte(code))
	e := &airlock.Execution{
		ID:         m.cfg.NewID(),
		TenantID:   tenant.ID,
		SessionID:  id,
		Language:   lang,
		Image:      image,
		CodeSHA256: hex.EncodeToString(sum[:]),
		Status:     airlock.StatusRunning,
		Artifacts:  []airlock.Artifact{},
		CreatedAt:  m.cfg.Now().UTC(),
	}
	if err := m.cfg.Store.CreateExecution(ctx, e); err != nil {
		return nil, fmt.Errorf("session: record execution: %w", err)
	}
	tried := airlock.NetworkAttempts(ctx, sb)
	runErr := m.runExec(ctx, l, sb, e, req, argv, env, timeout, limits, obs)
	e.HadNetworkAttempt = airlock.NetworkAttempts(ctx, sb) > tried
	finished := m.cfg.Now().UTC()
	e.FinishedAt = &finished
	e.Status = airlock.StatusCompleted
	if runErr != nil {
		e.Status = airlock.StatusFailed
		e.Error = runErr.Error()
	}
	if err := m.cfg.Store.FinishExecution(context.WithoutCancel(ctx), e); err != nil {
		return nil, fmt.Errorf("session: record execution result: %w", err)
	}
	if runErr != nil {
		return nil, m.failure(l, runErr)
	}
	return e, nil
}

// failure is the API error of a call that failed because of its session:
// session-ended if the session ended meanwhile, else what went wrong.
func (m *Manager) failure(l *live, err error) error {
	select {
	case <-l.ended:
	default:
		if l.sb != nil {
			select {
			case <-l.sb.Done():
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

func (m *Manager) runExec(ctx context.Context, l *live, sb airlock.Sandbox, e *airlock.Execution, req airlock.SessionExecRequest, argv, env []string, timeout time.Duration, limits airlock.SessionLimits, obs airlock.ExecObserver) error {
	stdout := &capture{max: limits.OutputBytes}
	stderr := &capture{max: limits.OutputBytes}
	if obs != nil {
		stdout.observe, stderr.observe = obs.Stdout, obs.Stderr
	}
	start := time.Now()
	p, err := sb.Agent().Exec(ctx, protocol.ExecRequest{
		Argv:             argv,
		Env:              env,
		Cwd:              req.Cwd,
		Stdin:            req.Stdin != "",
		TimeoutMS:        timeout.Milliseconds(),
		MemoryLimitBytes: limits.ProcessMemoryBytes,
	}, stdout, stderr)
	if err != nil {
		return fmt.Errorf("start program: %w", err)
	}
	pid := p.PID()
	if pid > 0 {
		l.mu.Lock()
		l.procs[pid] = &running{p: p, executionID: e.ID, started: start}
		l.mu.Unlock()
		defer func() {
			l.mu.Lock()
			delete(l.procs, pid)
			l.mu.Unlock()
		}()
	}
	if obs != nil {
		obs.Started(e.ID, pid)
	}
	if req.Stdin != "" {
		p.Write([]byte(req.Stdin))
		p.CloseStdin()
	}
	deadline := time.NewTimer(timeout + killGrace)
	defer deadline.Stop()
	var status protocol.ExitStatus
	var waitErr error
	select {
	case <-p.Done():
		status, waitErr = p.Wait(ctx)
	case <-deadline.C:
		// The agent did not report its own kill: kill the group from here
		// and give the report a moment.
		p.Signal(int(syscall.SIGKILL))
		e.TimedOut = true
		select {
		case <-p.Done():
			status, waitErr = p.Wait(ctx)
		case <-time.After(killGrace):
			waitErr = errors.New("the program did not end after its timeout")
		}
	case <-ctx.Done():
		// The caller went away: nobody will read the result.
		p.Signal(int(syscall.SIGKILL))
		return fmt.Errorf("the client went away; the program was killed: %w", ctx.Err())
	case <-l.ended:
		return errors.New("the session ended while the program ran")
	}
	e.DurationMS = time.Since(start).Milliseconds()
	if waitErr != nil && !e.TimedOut {
		return waitErr
	}
	if st, err := sb.Stats(ctx); err == nil {
		e.PeakMemoryMB = mib(st.PeakMemoryBytes)
		e.OOMKilled = st.OOMKilled
	}
	if waitErr == nil {
		e.ExitCode = status.Code
		e.TimedOut = e.TimedOut || status.TimedOut
		if status.Error != "" {
			stderr.Write([]byte("airlock: " + status.Error + "\n"))
		}
	} else {
		e.ExitCode = 137
	}
	e.Stdout, e.StdoutTruncated = stdout.result()
	e.Stderr, e.StderrTruncated = stderr.result()
	return nil
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
