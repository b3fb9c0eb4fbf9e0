package session

import (
	"context"
	"errors"
	"sort"
	"sync"
	"syscall"
	"time"

	"github.com/airlockhq/airlock"
)

// Terminals: a PTY is a program on a pseudo-terminal in the session's
// sandbox (the agent's exec with a PTY). The manager holds its exec
// stream open and keeps the last airlock.PTYScrollbackBytes of its output
// in a ring, so clients may attach, detach and attach again: each attach
// gets the scrollback, then the live output. A PTY ends when its program
// exits, when it is deleted, or with its session (or with this server:
// the exec is not retained by the agent).

// ptyTable is a session's terminals. The zero value is ready.
type ptyTable struct {
	mu sync.Mutex
	m  map[string]*PTY
}

// PTY is a terminal of a live session.
type PTY struct {
	info airlock.PTYInfo
	p    airlock.Process
	done chan struct{} // closed when the program has ended and is removed

	mu      sync.Mutex
	ring    []byte // the latest output, at most PTYScrollbackBytes
	subs    map[*attachment]struct{}
	status  airlock.ExitStatus
	waitErr error
}

// Write is the program's output: kept in the ring and sent to every
// attached client. A client that does not keep up is detached (it may
// attach again and gets the scrollback).
func (t *PTY) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.ring = append(t.ring, b...)
	if over := len(t.ring) - airlock.PTYScrollbackBytes; over > 0 {
		t.ring = append(t.ring[:0], t.ring[over:]...)
	}
	for a := range t.subs {
		c := make([]byte, len(b))
		copy(c, b)
		select {
		case a.out <- c:
		default:
			delete(t.subs, a)
			a.closeOut()
		}
	}
	return len(b), nil
}

// attachment is one client attached to a PTY.
type attachment struct {
	t        *PTY
	out      chan []byte
	outOnce  sync.Once
	detached bool
}

// attachQueue bounds the chunks queued for one client.
const attachQueue = 256

func (a *attachment) closeOut() { a.outOnce.Do(func() { close(a.out) }) }

// Info describes the PTY.
func (a *attachment) Info() airlock.PTYInfo { return a.t.info }

// Output delivers the scrollback (first) and then the live output; it is
// closed when the client is detached (Detach, or too slow) or the PTY
// has ended.
func (a *attachment) Output() <-chan []byte { return a.out }

// Done is closed when the PTY has ended.
func (a *attachment) Done() <-chan struct{} { return a.t.done }

// Exit is the program's exit status once Done is closed; an error means
// it is unknown (the session or the server ended).
func (a *attachment) Exit() (airlock.ExitStatus, error) {
	a.t.mu.Lock()
	defer a.t.mu.Unlock()
	return a.t.status, a.t.waitErr
}

// Input types b into the terminal.
func (a *attachment) Input(b []byte) error {
	for len(b) > 0 {
		n := min(len(b), airlock.MaxStdinBytes)
		if _, err := a.t.p.Write(b[:n]); err != nil {
			return err
		}
		b = b[n:]
	}
	return nil
}

// Resize changes the terminal's size.
func (a *attachment) Resize(cols, rows int) error {
	if err := airlock.ValidatePTYSize(cols, rows); err != nil {
		return err
	}
	r, ok := a.t.p.(airlock.Resizer)
	if !ok {
		return errors.New("session: the process cannot be resized")
	}
	if err := r.Resize(cols, rows); err != nil {
		return err
	}
	a.t.mu.Lock()
	a.t.info.Cols, a.t.info.Rows = cols, rows
	a.t.mu.Unlock()
	return nil
}

// Detach lets go of the PTY; it runs on.
func (a *attachment) Detach() {
	a.t.mu.Lock()
	delete(a.t.subs, a)
	a.t.mu.Unlock()
	a.closeOut()
}

func ptyNotFound(sessionID, ptyID string) error {
	return airlock.Problem(airlock.ENOTFOUND, "pty-not-found", "no terminal %s in session %s", ptyID, sessionID)
}

// CreatePTY starts a program on a new terminal in the tenant's session.
func (m *Manager) CreatePTY(ctx context.Context, tenant *airlock.Tenant, id string, req airlock.CreatePTYRequest) (*airlock.PTYInfo, error) {
	if err := req.Validate(); err != nil {
		return nil, err
	}
	l, end, err := m.begin(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	defer end()
	argv := req.Cmd
	if len(argv) == 0 {
		argv = airlock.DefaultPTYCmd
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

	l.ptys.mu.Lock()
	if len(l.ptys.m) >= airlock.MaxPTYsPerSession {
		l.ptys.mu.Unlock()
		return nil, airlock.Problem(airlock.ECONFLICT, "too-many-ptys", "a session holds at most %d terminals; delete one first", airlock.MaxPTYsPerSession)
	}
	if l.ptys.m == nil {
		l.ptys.m = map[string]*PTY{}
	}
	ptyID := "pty-" + m.cfg.NewID()[:16]
	t := &PTY{info: airlock.PTYInfo{PTYID: ptyID, SessionID: id, Cols: req.Cols, Rows: req.Rows}, done: make(chan struct{}), subs: map[*attachment]struct{}{}}
	l.ptys.m[ptyID] = t // holds the place while it starts
	l.ptys.mu.Unlock()
	forget := func() {
		l.ptys.mu.Lock()
		if l.ptys.m[ptyID] == t {
			delete(l.ptys.m, ptyID)
		}
		l.ptys.mu.Unlock()
	}

	l.mu.Lock()
	mem := l.rec.Limits.ProcessMemoryBytes
	l.mu.Unlock()
	p, err := l.sb().Agent().Exec(ctx, airlock.ExecRequest{
		Argv: argv, Env: env, Cwd: req.Cwd, Stdin: true, MemoryLimitBytes: mem,
		PTY: &airlock.PTYSize{Cols: req.Cols, Rows: req.Rows},
	}, t, nil)
	if err != nil {
		forget()
		return nil, m.failure(l, err)
	}
	t.p = p
	t.info.PID = p.PID()
	go func() {
		st, err := p.Wait(context.Background())
		forget()
		t.mu.Lock()
		t.status, t.waitErr = st, err
		for a := range t.subs {
			delete(t.subs, a)
			a.closeOut()
		}
		t.mu.Unlock()
		close(t.done)
	}()
	info := t.info
	return &info, nil
}

// pty returns a terminal of the tenant's live session.
func (m *Manager) pty(ctx context.Context, tenant *airlock.Tenant, id, ptyID string, resume bool) (*PTY, error) {
	lookup := m.lookup
	if resume {
		lookup = m.lookupLive
	}
	l, err := lookup(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	rec := l.rec
	l.mu.Unlock()
	if !rec.State.Live() {
		return nil, ended(&rec)
	}
	l.ptys.mu.Lock()
	t := l.ptys.m[ptyID]
	l.ptys.mu.Unlock()
	if t == nil || t.p == nil {
		return nil, ptyNotFound(id, ptyID)
	}
	return t, nil
}

// AttachPTY attaches a client to a terminal of the tenant's session. Its
// Output starts with the scrollback. A paused session whose lifecycle
// has auto_resume is resumed first (without it: session-paused); its
// terminals did not outlive the pause, so the attach then finds none
// (pty-not-found) unless it names one made since.
func (m *Manager) AttachPTY(ctx context.Context, tenant *airlock.Tenant, id, ptyID string) (airlock.PTYAttachment, error) {
	t, err := m.pty(ctx, tenant, id, ptyID, true)
	if err != nil {
		return nil, err
	}
	a := &attachment{t: t, out: make(chan []byte, attachQueue+1)}
	t.mu.Lock()
	defer t.mu.Unlock()
	select {
	case <-t.done:
		return nil, ptyNotFound(id, ptyID)
	default:
	}
	if len(t.ring) > 0 {
		a.out <- append([]byte(nil), t.ring...)
	}
	t.subs[a] = struct{}{}
	return a, nil
}

// DeletePTY ends a terminal: its program's process group is killed. It
// returns once the terminal is gone (or ctx ends).
func (m *Manager) DeletePTY(ctx context.Context, tenant *airlock.Tenant, id, ptyID string) error {
	t, err := m.pty(ctx, tenant, id, ptyID, false)
	if err != nil {
		return err
	}
	// SIGHUP first, as a closed terminal would; SIGKILL for what stays.
	t.p.Signal(int(syscall.SIGHUP))
	select {
	case <-t.done:
		return nil
	case <-time.After(time.Second):
	case <-ctx.Done():
		return ctx.Err()
	}
	t.p.Signal(int(syscall.SIGKILL))
	select {
	case <-t.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

var _ airlock.PTYService = (*Manager)(nil)
