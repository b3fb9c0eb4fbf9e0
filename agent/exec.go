package agent

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/airlockhq/airlock/agent/protocol"
)

// drainGrace is how long output of a finished program is still read after
// its process group was killed (to collect what was already written).
const drainGrace = 500 * time.Millisecond

// processTable tracks running programs by PID, so the reaper leaves their
// exit statuses to os/exec and shutdown can kill them.
type processTable struct {
	mu    sync.Mutex
	procs map[int]*program
}

func newProcessTable() *processTable { return &processTable{procs: map[int]*program{}} }

func (t *processTable) remove(pid int) {
	t.mu.Lock()
	delete(t.procs, pid)
	t.mu.Unlock()
}

func (t *processTable) count() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.procs)
}

func (t *processTable) killAll() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for pid := range t.procs {
		syscall.Kill(-pid, syscall.SIGKILL)
	}
}

// program is a process the agent started: an exec, a warm runtime or a
// context's interpreter (those two only for the process table). An exec's
// output goes to the stream that reads it now (its sink), if any. A
// retained exec (RetainBytes > 0) also keeps the start of its output and,
// once it ends, its exit status, and outlives its connection; see
// processes.go.
type program struct {
	pid    int
	exited atomic.Bool // reaped: its PID may be someone else's now
	stdin  *stdinQueue // nil when the exec did not ask for stdin
	tty    *terminal   // the program's terminal; nil without a PTY

	mu sync.Mutex
	// Set when a request takes the program (at its start, or when it
	// takes a warm runtime).
	argv0     string
	tag       string
	started   time.Time
	timeoutMS int64
	retain    int64 // bytes kept per stream; 0: not retained
	tail      bool  // keep the last retain bytes, not the first (a terminal)

	sink        *procStream      // the stream reading it now; nil for none
	waiting     bool             // a warm runtime no request has taken yet
	pending     []protocol.Frame // output while waiting, up to maxPendingOutput
	pendingSize int

	stdout, stderr               []byte // retained output
	stdoutDropped, stderrDropped int64  // output beyond retain
	stdoutTotal                  int64  // stdout bytes written, kept or not

	ended    bool
	status   protocol.ExitStatus
	reported bool // its TExit was sent on a stream
}

// signal signals the program's process group, unless it has been reaped.
func (p *program) signal(sig syscall.Signal) {
	if !p.exited.Load() {
		syscall.Kill(-p.pid, sig)
	}
}

func (p *program) closeStdin() {
	if p.stdin != nil {
		p.stdin.close()
	}
}

// take hands the program to the request that started it (or took its warm
// runtime). Called before any stream reads it.
func (p *program) take(req *protocol.ExecRequest) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.argv0 = boundedText(req.Argv[0], protocol.MaxNameBytes)
	p.tag = req.Tag
	p.started = time.Now()
	p.timeoutMS = req.TimeoutMS
	p.retain = req.RetainBytes
	p.tail = req.PTY != nil
}

// output records what the program wrote and sends it to its reader.
func (p *program) output(t protocol.Type, b []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.waiting {
		if p.pendingSize+len(b) <= maxPendingOutput {
			p.pending = append(p.pending, protocol.Frame{Type: t, Payload: b})
			p.pendingSize += len(b)
		}
		return
	}
	p.keep(t, b)
	if h := p.sink; h != nil {
		// An error means the connection is over; its end detaches us.
		h.s.send(protocol.Frame{Type: t, Stream: h.stream, Payload: b})
	}
}

// keep retains the start of the output of a retained program. Called
// with mu held.
func (p *program) keep(t protocol.Type, b []byte) {
	if p.retain == 0 {
		return
	}
	buf, dropped := &p.stdout, &p.stdoutDropped
	if t == protocol.TStderr {
		buf, dropped = &p.stderr, &p.stderrDropped
	} else {
		p.stdoutTotal += int64(len(b))
	}
	if p.tail {
		// The latest retain bytes: the oldest go first.
		*buf = append(*buf, b...)
		if over := int64(len(*buf)) - p.retain; over > 0 {
			*buf = append((*buf)[:0], (*buf)[over:]...)
			*dropped += over
		}
		return
	}
	n := int(min(int64(len(b)), p.retain-int64(len(*buf))))
	*buf = append(*buf, b[:n]...)
	*dropped += int64(len(b) - n)
}

// attachTo makes h the program's reader, sending it the output of a warm
// runtime from before the request. Called with mu held.
func (p *program) attachTo(h *procStream) {
	if p.waiting {
		p.waiting = false
		for _, f := range p.pending {
			p.keep(f.Type, f.Payload)
			f.Stream = h.stream
			h.s.send(f)
		}
		p.pending, p.pendingSize = nil, 0
	}
	p.sink = h
}

// procStream is a stream that reads a program: the exec that started it,
// or an attach.
type procStream struct {
	s      *server
	stream uint32
	p      *program
	exec   bool // the exec's own stream, or an attach with Stdin: stdin goes through it
}

// stdinQueue holds the host's stdin bytes for one program. Queueing never
// blocks, so a program that does not read its stdin cannot stall the
// dispatch loop (and with it every other stream); bytes that arrive after
// the close, or after the program stopped reading, are dropped.
type stdinQueue struct {
	mu     sync.Mutex
	bufs   [][]byte
	closed bool
	ready  chan struct{} // capacity 1: wakes the writer
}

func newStdinQueue() *stdinQueue { return &stdinQueue{ready: make(chan struct{}, 1)} }

func (q *stdinQueue) push(b []byte) {
	q.mu.Lock()
	if !q.closed {
		q.bufs = append(q.bufs, b)
	}
	q.mu.Unlock()
	q.wake()
}

// close ends the input after what is queued.
func (q *stdinQueue) close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	q.wake()
}

// drop ends the input now, discarding what is queued.
func (q *stdinQueue) drop() {
	q.mu.Lock()
	q.closed = true
	q.bufs = nil
	q.mu.Unlock()
	q.wake()
}

func (q *stdinQueue) wake() {
	select {
	case q.ready <- struct{}{}:
	default:
	}
}

// next waits for the next bytes; false once the input has ended.
func (q *stdinQueue) next() ([]byte, bool) {
	for {
		q.mu.Lock()
		if len(q.bufs) > 0 {
			b := q.bufs[0]
			q.bufs[0] = nil
			q.bufs = q.bufs[1:]
			q.mu.Unlock()
			return b, true
		}
		closed := q.closed
		q.mu.Unlock()
		if closed {
			return nil, false
		}
		<-q.ready
	}
}

func (h *procStream) frame(f protocol.Frame) {
	switch f.Type {
	case protocol.TStdin:
		if h.exec && h.p.stdin != nil {
			h.p.stdin.push(f.Payload)
		}
	case protocol.TStdinClose:
		if h.exec {
			h.p.closeStdin()
		}
	case protocol.TSignal:
		var m protocol.SignalRequest
		if protocol.Decode(f.Payload, &m) == nil {
			h.p.signal(syscall.Signal(m.Signal))
		}
	case protocol.TResize:
		var m protocol.ResizeRequest
		if h.exec && h.p.tty != nil && protocol.Decode(f.Payload, &m) == nil {
			h.p.tty.resize(m.Cols, m.Rows)
		}
	}
}

// abort detaches a retained program from a connection that is over (it
// runs on, its stdin closed; a terminal's stays open for an attach with
// Stdin), and kills any other: nobody reads it.
func (h *procStream) abort() {
	p := h.p
	p.mu.Lock()
	if p.sink == h {
		p.sink = nil
	}
	retained := p.retain > 0
	p.mu.Unlock()
	if !retained {
		p.signal(syscall.SIGKILL)
	}
	if !retained || p.tty == nil {
		p.closeStdin()
	}
}

// takenOver ends the stream of a program another stream has attached.
// Its stdin is closed (only the exec's own stream could write it),
// except a terminal's: an attach with Stdin writes it next.
func (h *procStream) takenOver() {
	h.s.clearHandler(h.stream, h)
	if h.p.tty == nil {
		h.p.closeStdin()
	}
	h.s.sendError(h.stream, "attached_elsewhere", errors.New("attached elsewhere"))
}

// exec starts a program and streams its output until it ends.
func (s *server) exec(stream uint32, req *protocol.ExecRequest) {
	for _, f := range req.Files {
		if err := s.writeWhole(f); err != nil {
			s.sendError(stream, errCode(err), fmt.Errorf("hand in %s: %w", f.Path, err))
			return
		}
	}
	if w := s.takeWarm(req); w != nil && s.execWarm(stream, req, w) {
		return
	}
	cwd := s.cfg.Workspace
	if req.Cwd != "" {
		cwd = req.Cwd
		if !filepath.IsAbs(cwd) {
			cwd = filepath.Join(s.cfg.Workspace, cwd)
		}
	}
	cmd := s.command(req.Argv, req.MemoryLimitBytes)
	cmd.Dir = cwd
	cmd.Env = append(append([]string{}, s.cfg.Env...), req.Env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if req.PTY != nil {
		s.execPTY(stream, req, cmd)
		return
	}

	outR, outW, err := os.Pipe()
	if err != nil {
		s.startFailed(stream, err)
		return
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		s.startFailed(stream, err)
		return
	}
	cmd.Stdout, cmd.Stderr = outW, errW
	p := &program{}
	var stdinW *os.File
	if req.Stdin {
		var stdinR *os.File
		stdinR, stdinW, err = os.Pipe()
		if err != nil {
			outR.Close()
			outW.Close()
			errR.Close()
			errW.Close()
			s.startFailed(stream, err)
			return
		}
		cmd.Stdin = stdinR
		defer stdinR.Close()
		p.stdin = newStdinQueue()
	}
	s.procs.mu.Lock() // hold the reaper off until the PID is tracked
	err = cmd.Start()
	outW.Close()
	errW.Close()
	if err != nil {
		s.procs.mu.Unlock()
		outR.Close()
		errR.Close()
		if stdinW != nil {
			stdinW.Close()
		}
		s.startFailed(stream, err)
		return
	}
	s.adopt(stream, req, p, cmd)
	if stdinW != nil {
		go func() {
			defer stdinW.Close()
			p.feedStdin(stdinW)
		}()
	}

	var wg sync.WaitGroup
	wg.Add(2)
	go pipeOut(&wg, p, protocol.TStdout, outR)
	go pipeOut(&wg, p, protocol.TStderr, errR)
	go s.supervise(p, cmd, &wg, outR, errR, req.TimeoutMS)
}

// supervise waits for a started program, enforces its timeout, drains its
// output and reports its exit status to its reader. It outlives the
// connection that started the program.
func (c *core) supervise(p *program, cmd *exec.Cmd, wg *sync.WaitGroup, outR, errR *os.File, timeoutMS int64) {
	var timedOut atomic.Bool // set on the timer's goroutine
	var timer *time.Timer
	// A timeout too long for a Duration (centuries) is no timeout; it
	// must not overflow into a negative one that fires at once.
	if timeoutMS > 0 && timeoutMS <= math.MaxInt64/int64(time.Millisecond) {
		timer = time.AfterFunc(time.Duration(timeoutMS)*time.Millisecond, func() {
			timedOut.Store(true)
			p.signal(syscall.SIGKILL)
		})
	}
	werr := cmd.Wait()
	p.exited.Store(true)
	if timer != nil {
		timer.Stop()
	}
	// The program is done: end what it left in its group, then give
	// its pipes a moment to drain before closing them.
	syscall.Kill(-p.pid, syscall.SIGKILL)
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(drainGrace):
		outR.Close()
		if errR != nil {
			errR.Close()
		}
		<-done
	}
	if p.stdin != nil {
		// Nobody is left to read what is still queued.
		p.stdin.drop()
	}
	c.procs.remove(p.pid)
	st := exitStatus(cmd.ProcessState, werr)
	st.TimedOut = timedOut.Load()
	c.finish(p, st)
}

// finish records a program's exit and sends it to its reader. A retained
// program whose exit no stream received stays listed until one does.
func (c *core) finish(p *program, st protocol.ExitStatus) {
	p.mu.Lock()
	if p.retain > 0 {
		st.StdoutDropped, st.StderrDropped = p.stdoutDropped, p.stderrDropped
	}
	p.ended, p.status = true, st
	if h := p.sink; h != nil {
		p.sink = nil
		h.s.clearHandler(h.stream, h)
		if h.s.send(protocol.Frame{Type: protocol.TExit, Stream: h.stream, Payload: protocol.Encode(st)}) == nil {
			p.reported = true
		}
	}
	retained, reported := p.retain > 0, p.reported
	p.mu.Unlock()
	if !retained {
		return
	}
	if reported {
		c.retained.remove(p)
	} else {
		c.retained.ended(p)
	}
}

// startFailed reports a program that could not start as an exit status
// (127, like a shell), which is a result, not a protocol error.
func (s *server) startFailed(stream uint32, err error) {
	code := 127
	if errors.Is(err, os.ErrPermission) {
		code = 126
	}
	s.send(protocol.Frame{Type: protocol.TResponse, Stream: stream, Payload: protocol.Encode(protocol.Response{})})
	s.send(protocol.Frame{Type: protocol.TExit, Stream: stream, Payload: protocol.Encode(protocol.ExitStatus{Code: code, Error: err.Error()})})
}

func exitStatus(ps *os.ProcessState, err error) protocol.ExitStatus {
	if ps == nil {
		return protocol.ExitStatus{Code: 127, Error: errString(err)}
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		sig := int(ws.Signal())
		return protocol.ExitStatus{Code: 128 + sig, Signal: sig}
	}
	return protocol.ExitStatus{Code: ps.ExitCode()}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// pipeOut reads one output pipe of a program until EOF. It goes on when
// nobody reads the program: a retained one keeps running.
func pipeOut(wg *sync.WaitGroup, p *program, t protocol.Type, r io.ReadCloser) {
	defer wg.Done()
	defer r.Close()
	buf := make([]byte, 64<<10)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			payload := make([]byte, n)
			copy(payload, buf[:n])
			p.output(t, payload)
		}
		if err != nil {
			return
		}
	}
}

// maxPendingOutput bounds what a warm runtime may print before a request
// takes it; the rest is dropped.
const maxPendingOutput = 64 << 10

// boundedText returns s as valid UTF-8 of at most n bytes, cut at a rune
// boundary.
func boundedText(s string, n int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// adopt tracks a program just started (s.procs.mu held since before
// cmd.Start, so the reaper cannot miss it; released here), makes the
// exec stream its sink and answers the request with its PID.
func (s *server) adopt(stream uint32, req *protocol.ExecRequest, p *program, cmd *exec.Cmd) {
	p.pid = cmd.Process.Pid
	s.procs.procs[p.pid] = p
	s.procs.mu.Unlock()
	p.take(req)
	h := &procStream{s: s, stream: stream, p: p, exec: true}
	p.sink = h // nothing reads p yet
	if p.retain > 0 {
		s.retained.add(p)
	}
	s.setHandler(stream, h)
	s.respond(stream, protocol.Response{PID: p.pid})
}

// feedStdin writes the program's queued input to w until the queue ends,
// or drops the rest once w refuses it (the program stopped reading).
func (p *program) feedStdin(w io.Writer) {
	for {
		b, ok := p.stdin.next()
		if !ok {
			return
		}
		if _, err := w.Write(b); err != nil {
			p.stdin.drop()
			return
		}
	}
}
