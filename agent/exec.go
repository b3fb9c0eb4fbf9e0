package agent

import (
	"context"
	"errors"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/airlockhq/airlock/protocol"
)

// drainGrace is how long output of a finished program is still read after
// its process group was killed (to collect what was already written).
const drainGrace = 500 * time.Millisecond

// processTable tracks running programs by PID, so the reaper leaves their
// exit statuses to os/exec and shutdown can kill them.
type processTable struct {
	mu    sync.Mutex
	procs map[int]*execHandler
}

func newProcessTable() *processTable { return &processTable{procs: map[int]*execHandler{}} }

func (t *processTable) add(pid int, h *execHandler) {
	t.mu.Lock()
	t.procs[pid] = h
	t.mu.Unlock()
}

func (t *processTable) remove(pid int) {
	t.mu.Lock()
	delete(t.procs, pid)
	t.mu.Unlock()
}

func (t *processTable) has(pid int) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	_, ok := t.procs[pid]
	return ok
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

// execHandler is one running program's stream.
type execHandler struct {
	s      *server
	stream uint32
	pid    int
	stdin  *stdinQueue // nil when the exec did not ask for stdin
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

func (h *execHandler) frame(f protocol.Frame) {
	switch f.Type {
	case protocol.TStdin:
		if h.stdin != nil {
			h.stdin.push(f.Payload)
		}
	case protocol.TStdinClose:
		h.closeStdin()
	case protocol.TSignal:
		var m protocol.SignalRequest
		if protocol.Decode(f.Payload, &m) == nil {
			syscall.Kill(-h.pid, syscall.Signal(m.Signal))
		}
	}
}

func (h *execHandler) closeStdin() {
	if h.stdin != nil {
		h.stdin.close()
	}
}

func (h *execHandler) abort() { syscall.Kill(-h.pid, syscall.SIGKILL) }

// exec starts a program and streams its output until it ends.
func (s *server) exec(ctx context.Context, stream uint32, req *protocol.ExecRequest) {
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
	h := &execHandler{s: s, stream: stream}
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
		h.stdin = newStdinQueue()
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
	h.pid = cmd.Process.Pid
	s.procs.procs[h.pid] = h
	s.procs.mu.Unlock()
	s.setHandler(stream, h)
	s.respond(stream, protocol.Response{PID: h.pid})

	if stdinW != nil {
		go func() {
			defer stdinW.Close()
			for {
				b, ok := h.stdin.next()
				if !ok {
					return
				}
				if _, err := stdinW.Write(b); err != nil {
					h.stdin.drop() // the program stopped reading
					return
				}
			}
		}()
	}

	out := &outputTarget{s: s, stream: stream}
	var wg sync.WaitGroup
	wg.Add(2)
	go s.pipeOut(&wg, out, protocol.TStdout, outR)
	go s.pipeOut(&wg, out, protocol.TStderr, errR)
	go s.supervise(stream, h, cmd, &wg, outR, errR, req.TimeoutMS)
}

// supervise waits for a started program, enforces its timeout, drains its
// output and reports its exit status on the stream.
func (s *server) supervise(stream uint32, h *execHandler, cmd *exec.Cmd, wg *sync.WaitGroup, outR, errR *os.File, timeoutMS int64) {
	var timedOut atomic.Bool // set on the timer's goroutine
	var timer *time.Timer
	// A timeout too long for a Duration (centuries) is no timeout; it
	// must not overflow into a negative one that fires at once.
	if timeoutMS > 0 && timeoutMS <= math.MaxInt64/int64(time.Millisecond) {
		timer = time.AfterFunc(time.Duration(timeoutMS)*time.Millisecond, func() {
			timedOut.Store(true)
			syscall.Kill(-h.pid, syscall.SIGKILL)
		})
	}
	werr := cmd.Wait()
	if timer != nil {
		timer.Stop()
	}
	// The program is done: end what it left in its group, then give
	// its pipes a moment to drain before closing them.
	syscall.Kill(-h.pid, syscall.SIGKILL)
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(drainGrace):
		outR.Close()
		errR.Close()
		<-done
	}
	if h.stdin != nil {
		// Nobody is left to read what is still queued.
		h.stdin.drop()
	}
	s.procs.remove(h.pid)
	s.setHandler(stream, nil)
	st := exitStatus(cmd.ProcessState, werr)
	st.TimedOut = timedOut.Load()
	s.send(protocol.Frame{Type: protocol.TExit, Stream: stream, Payload: protocol.Encode(st)})
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

// pipeOut streams one output pipe as frames until EOF.
func (s *server) pipeOut(wg *sync.WaitGroup, out *outputTarget, t protocol.Type, r io.ReadCloser) {
	defer wg.Done()
	defer r.Close()
	buf := make([]byte, 64<<10)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			payload := make([]byte, n)
			copy(payload, buf[:n])
			if out.send(t, payload) != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// maxPendingOutput bounds what a warm runtime may print before a request
// is attached to it; the rest is dropped.
const maxPendingOutput = 64 << 10

// outputTarget is where a program's output frames go: a fixed stream, or,
// for a warm runtime started before any request, a stream attached later.
// Output before that is kept (up to maxPendingOutput) and sent on attach.
type outputTarget struct {
	s       *server
	mu      sync.Mutex
	stream  uint32 // 0 until attached
	pending []protocol.Frame
	size    int
}

func (o *outputTarget) send(t protocol.Type, payload []byte) error {
	o.mu.Lock()
	if o.stream == 0 {
		if o.size+len(payload) <= maxPendingOutput {
			o.pending = append(o.pending, protocol.Frame{Type: t, Payload: payload})
			o.size += len(payload)
		}
		o.mu.Unlock()
		return nil
	}
	stream := o.stream
	o.mu.Unlock()
	return o.s.send(protocol.Frame{Type: t, Stream: stream, Payload: payload})
}

// attach sends what is pending on stream and everything after it too.
func (o *outputTarget) attach(stream uint32) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, f := range o.pending {
		f.Stream = stream
		o.s.send(f)
	}
	o.pending, o.size = nil, 0
	o.stream = stream
}
