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
// sandbox (the agent's exec with a PTY, retained: see
// airlock.ExecRequest.RetainBytes). The manager reads its output and
// keeps the last airlock.PTYScrollbackBytes of it in a ring, so clients
// may attach, detach and attach again: each attach gets the scrollback,
// then the live output. A PTY ends when its program exits, when it is
// deleted, or with its session.
//
// A PTY outlives a pause. Before the sandbox is checkpointed the manager
// detaches each terminal's stream in the agent (the program runs on
// inside the checkpoint, its terminal open, the agent keeping the tail of
// its output), and keeps the session's table, rings and attached clients
// while it is paused (pausedPTYs). At the resume, before the session
// serves a call, it attaches each program again by PID, with its input,
// asking the agent only for what came after the bytes it holds. A client
// that stayed attached sees no output while the session is paused; what
// it types resumes a session with auto_resume. After a restart of the
// server that kept its sessions (and at the resume of a session paused
// before a restart) the table is gone: the manager finds the terminals in
// the agent's list of retained programs (tagged with their PTY IDs) and
// attaches them from the start of what the agent kept.

// ptyTable is a session's terminals. The zero value is ready.
type ptyTable struct {
	mu sync.Mutex
	m  map[string]*PTY
}

// add puts t in the table unless it is full.
func (tab *ptyTable) add(t *PTY) error {
	tab.mu.Lock()
	defer tab.mu.Unlock()
	if len(tab.m) >= airlock.MaxPTYsPerSession {
		return airlock.Problem(airlock.ECONFLICT, "too-many-ptys", "a session holds at most %d terminals; delete one first", airlock.MaxPTYsPerSession)
	}
	if tab.m == nil {
		tab.m = map[string]*PTY{}
	}
	tab.m[t.info.PTYID] = t
	return nil
}

// remove takes t out of the table, if it is there.
func (tab *ptyTable) remove(t *PTY) {
	tab.mu.Lock()
	defer tab.mu.Unlock()
	if tab.m[t.info.PTYID] == t {
		delete(tab.m, t.info.PTYID)
	}
}

func (tab *ptyTable) get(ptyID string) *PTY {
	tab.mu.Lock()
	defer tab.mu.Unlock()
	return tab.m[ptyID]
}

// list returns the terminals, in no order.
func (tab *ptyTable) list() []*PTY {
	tab.mu.Lock()
	defer tab.mu.Unlock()
	out := make([]*PTY, 0, len(tab.m))
	for _, t := range tab.m {
		out = append(out, t)
	}
	return out
}

// endAll ends every terminal (the session has ended): their clients are
// told err.
func (tab *ptyTable) endAll(err error) {
	for _, t := range tab.list() {
		t.mu.Lock()
		gen := t.gen
		t.mu.Unlock()
		t.end(gen, airlock.ExitStatus{}, err)
	}
}

// The exit of a terminal that ended with its session, or with the server
// (a paused session's: its program waits in the saved sandbox).
var (
	errSessionEnded  = errors.New("session: the session ended")
	errServerStopped = errors.New("session: the server stopped")
)

// pausedPTYs holds the terminal tables of paused sessions, by session ID.
type pausedPTYs struct {
	mu sync.Mutex
	m  map[string]*ptyTable
}

func (p *pausedPTYs) put(id string, tab *ptyTable) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.m == nil {
		p.m = map[string]*ptyTable{}
	}
	p.m[id] = tab
}

// endAll ends the terminals of every paused session (the server stops).
func (p *pausedPTYs) endAll(err error) {
	p.mu.Lock()
	all := p.m
	p.m = nil
	p.mu.Unlock()
	for _, tab := range all {
		tab.endAll(err)
	}
}

// take removes and returns a paused session's table (nil for none).
func (p *pausedPTYs) take(id string) *ptyTable {
	p.mu.Lock()
	defer p.mu.Unlock()
	tab := p.m[id]
	delete(p.m, id)
	return tab
}

// PTY is a terminal of a session.
type PTY struct {
	tab  *ptyTable
	done chan struct{} // closed when the program has ended and is removed
	// wake makes the session live again (a paused one with auto_resume
	// is resumed) for input that comes while it is paused.
	wake func(ctx context.Context) error

	mu   sync.Mutex
	info airlock.PTYInfo
	// p is the stream to the program now: nil while it starts, and
	// while it is detached for a pause (suspended). gen counts the
	// streams; output of an older one is dropped (a new one sends what
	// the older one had not delivered).
	p         airlock.Process
	gen       int
	suspended bool
	total     int64  // bytes of output received: where a new stream starts
	ring      []byte // the latest output, at most PTYScrollbackBytes
	subs      map[*attachment]struct{}
	ended     bool
	status    airlock.ExitStatus
	waitErr   error
}

func newPTY(info airlock.PTYInfo, tab *ptyTable, wake func(context.Context) error) *PTY {
	return &PTY{info: info, tab: tab, wake: wake, done: make(chan struct{}), subs: map[*attachment]struct{}{}}
}

// ptyOutput is the writer of one stream's output to its PTY.
type ptyOutput struct {
	t   *PTY
	gen int
}

func (o ptyOutput) Write(b []byte) (int, error) {
	o.t.output(o.gen, b)
	return len(b), nil
}

// output is what the program wrote, on stream gen: kept in the ring and
// sent to every attached client. A client that does not keep up is
// detached (it may attach again and gets the scrollback).
func (t *PTY) output(gen int, b []byte) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if gen != t.gen {
		return // a stream replaced by a newer one, which sends this again
	}
	t.total += int64(len(b))
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
}

// follow waits for stream gen's end. The program's exit ends the PTY; a
// lost stream ends it too, unless the PTY was detached for a pause (the
// program runs on in the saved sandbox) or a newer stream has replaced
// this one.
func (t *PTY) follow(p airlock.Process, gen int) {
	st, err := p.Wait(context.Background())
	t.mu.Lock()
	if gen != t.gen || (err != nil && t.suspended) {
		if gen == t.gen {
			t.p = nil
		}
		t.mu.Unlock()
		return
	}
	t.mu.Unlock()
	t.end(gen, st, err)
}

// end ends the PTY, if stream gen is still its stream: it leaves the
// table, Done is closed, and then its clients' output: a client that
// finds its output closed must already see Done closed, or it would take
// the end for a detach (too slow) instead of the program's exit.
func (t *PTY) end(gen int, st airlock.ExitStatus, err error) {
	t.mu.Lock()
	if gen != t.gen || t.ended {
		t.mu.Unlock()
		return
	}
	t.ended = true
	t.p = nil
	t.status, t.waitErr = st, err
	subs := make([]*attachment, 0, len(t.subs))
	for a := range t.subs {
		delete(t.subs, a)
		subs = append(subs, a)
	}
	t.mu.Unlock()
	t.tab.remove(t)
	close(t.done)
	for _, a := range subs {
		a.closeOut()
	}
}

// proc is the stream to the program now, nil while there is none.
func (t *PTY) proc() airlock.Process {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.p
}

// procOrWake is proc; while the PTY is detached for a pause it makes the
// session live again first (wakeWithin at most).
func (t *PTY) procOrWake() (airlock.Process, error) {
	if p := t.proc(); p != nil {
		return p, nil
	}
	t.mu.Lock()
	suspended, ended := t.suspended, t.ended
	t.mu.Unlock()
	if ended {
		return nil, errors.New("session: the terminal has ended")
	}
	if !suspended || t.wake == nil {
		return nil, errors.New("session: the terminal is not ready")
	}
	ctx, cancel := context.WithTimeout(context.Background(), wakeWithin)
	defer cancel()
	if err := t.wake(ctx); err != nil {
		return nil, err
	}
	if p := t.proc(); p != nil {
		return p, nil
	}
	return nil, errors.New("session: the terminal did not come back with its session")
}

// wakeWithin bounds the resume that input to a paused session's terminal
// waits for.
const wakeWithin = 2 * time.Minute

// attachment is one client attached to a PTY.
type attachment struct {
	t       *PTY
	out     chan []byte
	outOnce sync.Once
}

// attachQueue bounds the chunks queued for one client.
const attachQueue = 256

func (a *attachment) closeOut() { a.outOnce.Do(func() { close(a.out) }) }

// Info describes the PTY.
func (a *attachment) Info() airlock.PTYInfo {
	a.t.mu.Lock()
	defer a.t.mu.Unlock()
	return a.t.info
}

// Output delivers the scrollback (first) and then the live output; it is
// closed when the client is detached (Detach, or too slow) or the PTY
// has ended. It stays open while the session is paused.
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

// Input types b into the terminal. Input while the session is paused
// resumes it first (with auto_resume; else the session-paused problem).
func (a *attachment) Input(b []byte) error {
	p, err := a.t.procOrWake()
	if err != nil {
		return err
	}
	for len(b) > 0 {
		n := min(len(b), airlock.MaxStdinBytes)
		if _, err := p.Write(b[:n]); err != nil {
			return err
		}
		b = b[n:]
	}
	return nil
}

// Resize changes the terminal's size (resuming a paused session as
// Input does).
func (a *attachment) Resize(cols, rows int) error {
	if err := airlock.ValidatePTYSize(cols, rows); err != nil {
		return err
	}
	p, err := a.t.procOrWake()
	if err != nil {
		return err
	}
	r, ok := p.(airlock.Resizer)
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

	ptyID := "pty-" + m.cfg.NewID()[:16]
	t := newPTY(airlock.PTYInfo{PTYID: ptyID, SessionID: id, Cols: req.Cols, Rows: req.Rows}, l.ptys, m.waker(tenant, id))
	if err := l.ptys.add(t); err != nil { // holds the place while it starts
		return nil, err
	}

	l.mu.Lock()
	mem := l.rec.Limits.ProcessMemoryBytes
	l.mu.Unlock()
	// Retained, so that it outlives a pause (and a restart that keeps
	// sessions); its tag names it in the agent's list of programs.
	p, err := l.sb().Agent().Exec(ctx, airlock.ExecRequest{
		Argv: argv, Env: env, Cwd: req.Cwd, Stdin: true, MemoryLimitBytes: mem,
		PTY:         &airlock.PTYSize{Cols: req.Cols, Rows: req.Rows},
		RetainBytes: airlock.PTYScrollbackBytes, Tag: ptyID,
	}, ptyOutput{t: t}, nil)
	if err != nil {
		l.ptys.remove(t)
		return nil, m.failure(l, err)
	}
	t.mu.Lock()
	t.p = p
	t.info.PID = p.PID()
	info := t.info
	t.mu.Unlock()
	go t.follow(p, 0)
	return &info, nil
}

// waker makes the tenant's session live again, for a PTY's input.
func (m *Manager) waker(tenant *airlock.Tenant, id string) func(context.Context) error {
	return func(ctx context.Context) error { return m.EnsureRunning(ctx, tenant, id) }
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
	t := l.ptys.get(ptyID)
	if t == nil || t.proc() == nil {
		return nil, ptyNotFound(id, ptyID)
	}
	return t, nil
}

// AttachPTY attaches a client to a terminal of the tenant's session. Its
// Output starts with the scrollback. A paused session whose lifecycle
// has auto_resume is resumed first (without it: session-paused); its
// terminals outlive the pause, with their scrollback.
func (m *Manager) AttachPTY(ctx context.Context, tenant *airlock.Tenant, id, ptyID string) (airlock.PTYAttachment, error) {
	t, err := m.pty(ctx, tenant, id, ptyID, true)
	if err != nil {
		return nil, err
	}
	a := &attachment{t: t, out: make(chan []byte, attachQueue+1)}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ended {
		return nil, ptyNotFound(id, ptyID)
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
	p := t.proc()
	if p == nil {
		return ptyNotFound(id, ptyID)
	}
	// SIGHUP first, as a closed terminal would; SIGKILL for what stays.
	p.Signal(int(syscall.SIGHUP))
	select {
	case <-t.done:
		return nil
	case <-time.After(time.Second):
	case <-ctx.Done():
		return ctx.Err()
	}
	p.Signal(int(syscall.SIGKILL))
	select {
	case <-t.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

var _ airlock.PTYService = (*Manager)(nil)
