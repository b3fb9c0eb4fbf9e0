package agent

import (
	"bufio"
	"bytes"
	"cmp"
	"crypto/rand"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/airlockhq/airlock/agent/protocol"
)

// Code contexts: persistent interpreters (runners) the agent keeps for the
// host. A runner reads cells as JSON lines on fd 3 and answers on fd 4;
// what a cell prints goes to its stdout and stderr pipes, which the agent
// streams to the cell's request. At the end of each cell the runner writes
// a mark (random per runner) to both pipes, so the agent knows the cell's
// output is complete before it sends the result.

//go:embed runners/python_context.py
var pythonContext string

//go:embed runners/node_context.js
var nodeContext string

const (
	contextReadyTimeout = time.Minute     // interpreter start to "ready"
	interruptGrace      = 3 * time.Second // SIGINT to the cell's end, before the runner is killed
	markWait            = 2 * time.Second // result to the end of the cell's output
	stderrTailBytes     = 2048            // kept to explain a runner that failed to start
)

// contextTable holds the agent's contexts. They outlive connections: a
// cell running when its connection ends finishes, its result discarded.
type contextTable struct {
	mu sync.Mutex
	m  map[string]*codeContext
}

func newContextTable() *contextTable { return &contextTable{m: map[string]*codeContext{}} }

func (t *contextTable) get(id string) *codeContext {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.m[id]
}

// closeAll kills every runner (the agent is exiting).
func (t *contextTable) closeAll() {
	t.mu.Lock()
	m := t.m
	t.m = map[string]*codeContext{}
	t.mu.Unlock()
	for _, c := range m {
		if r := c.current(); r != nil {
			r.kill()
		}
	}
}

// list describes the contexts, oldest first.
func (t *contextTable) list() []protocol.ContextInfo {
	t.mu.Lock()
	cs := make([]*codeContext, 0, len(t.m))
	for _, c := range t.m {
		cs = append(cs, c)
	}
	t.mu.Unlock()
	infos := make([]protocol.ContextInfo, 0, len(cs))
	for _, c := range cs {
		state := protocol.ContextIdle
		switch {
		case c.busy.Load() > 0:
			state = protocol.ContextBusy
		case c.current() == nil:
			state = protocol.ContextDead
		}
		infos = append(infos, protocol.ContextInfo{
			ID: c.id, Language: c.language, State: state,
			CreatedAtMS: c.created.UnixMilli(), Runs: c.runs.Load(),
		})
	}
	slices.SortFunc(infos, func(a, b protocol.ContextInfo) int {
		return cmp.Or(cmp.Compare(a.CreatedAtMS, b.CreatedAtMS), strings.Compare(a.ID, b.ID))
	})
	return infos
}

// codeContext is one named context; its runner changes on restart.
type codeContext struct {
	id       string
	language string
	env      []string
	memLimit int64
	created  time.Time
	runs     atomic.Int64 // cells started
	busy     atomic.Int32 // > 0 while starting, restarting or running a cell

	cells sync.Mutex // one cell (or restart) at a time

	mu   sync.Mutex
	proc *runner // nil once the runner died
}

func (c *codeContext) current() *runner {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.proc
}

// forget drops r as the context's runner, if it still is.
func (c *codeContext) forget(r *runner) {
	c.mu.Lock()
	if c.proc == r {
		c.proc = nil
	}
	c.mu.Unlock()
}

// runner is one interpreter process. It outlives connections; its output
// goes to the stream of the running cell.
type runner struct {
	cmd     *exec.Cmd
	pid     int
	ctl     *os.File // its fd 3: cells go here
	mark    []byte
	results chan runnerMsg           // closed when fd 4 ends or breaks
	exited  chan struct{}            // closed once the process is reaped
	pumps   sync.WaitGroup           // stdout and stderr readers
	sink    atomic.Pointer[cellSink] // the running cell's stream, nil for none
	outMark chan struct{}
	errMark chan struct{}

	tailMu sync.Mutex
	tail   []byte // the end of its stderr
}

// cellSink is where a cell's output goes.
type cellSink struct {
	s      *server
	stream uint32
}

// runnerMsg is one line a runner writes on fd 4. It comes from a process
// that runs the user's code, so it is parsed as untrusted input.
type runnerMsg struct {
	Ready   bool                  `json:"ready"`
	Value   *string               `json:"value"`
	Error   *protocol.CellError   `json:"error"`
	Outputs []protocol.CellOutput `json:"outputs"`
	Dropped int                   `json:"dropped"`
}

// parseRunnerLine decodes a runner's line into a message.
func parseRunnerLine(line []byte) (runnerMsg, error) {
	var m runnerMsg
	if len(line) > protocol.MaxCellResultBytes {
		return m, errors.New("runner message too large")
	}
	if err := json.Unmarshal(line, &m); err != nil {
		return m, fmt.Errorf("runner message: %w", err)
	}
	if m.Dropped < 0 || m.Dropped > 1<<20 {
		return m, errors.New("runner message: bad dropped count")
	}
	return m, nil
}

// runnerArgv is the command line of a runner.
func runnerArgv(language string) []string {
	if language == protocol.ContextNode {
		return []string{"node", "-e", nodeContext}
	}
	return []string{"python3", "-u", "-c", pythonContext}
}

func (s *core) startRunner(c *codeContext) (*runner, error) {
	var mark [12]byte
	rand.Read(mark[:])
	r := &runner{
		mark:    []byte("\x1eairlock-cell-end-" + hex.EncodeToString(mark[:]) + "\x1e"),
		results: make(chan runnerMsg, 1),
		exited:  make(chan struct{}),
		outMark: make(chan struct{}, 1),
		errMark: make(chan struct{}, 1),
	}
	ctlR, ctlW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	resR, resW, err := os.Pipe()
	if err != nil {
		ctlR.Close()
		ctlW.Close()
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		closeAll(ctlR, ctlW, resR, resW)
		return nil, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		closeAll(ctlR, ctlW, resR, resW, outR, outW)
		return nil, err
	}
	cmd := s.command(runnerArgv(c.language), c.memLimit)
	cmd.Dir = s.cfg.Workspace
	cmd.Env = append(append(append([]string{}, s.cfg.Env...), c.env...), "PYTHONUNBUFFERED=1", "PYTHONDONTWRITEBYTECODE=1")
	cmd.Stdout, cmd.Stderr = outW, errW
	cmd.ExtraFiles = []*os.File{ctlR, resW} // fds 3 and 4
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	s.procs.mu.Lock() // hold the reaper off until the PID is tracked
	err = cmd.Start()
	closeAll(ctlR, resW, outW, errW)
	if err != nil {
		s.procs.mu.Unlock()
		closeAll(ctlW, resR, outR, errR)
		return nil, err
	}
	r.cmd = cmd
	r.pid = cmd.Process.Pid
	r.ctl = ctlW
	s.procs.procs[r.pid] = &program{pid: r.pid}
	s.procs.mu.Unlock()

	r.pumps.Add(2)
	go r.pump(outR, protocol.TStdout, r.outMark)
	go r.pump(errR, protocol.TStderr, r.errMark)
	go r.readResults(resR)
	go func() {
		cmd.Wait()
		r.pumps.Wait()
		s.procs.remove(r.pid)
		close(r.exited)
	}()

	select {
	case m, ok := <-r.results:
		if ok && m.Ready {
			return r, nil
		}
		r.kill()
		return nil, fmt.Errorf("%s did not start: %s", c.language, r.stderrTail())
	case <-r.exited:
		return nil, fmt.Errorf("%s exited at start: %s", c.language, r.stderrTail())
	case <-time.After(contextReadyTimeout):
		r.kill()
		return nil, fmt.Errorf("%s not ready after %s", c.language, contextReadyTimeout)
	}
}

func closeAll(fs ...*os.File) {
	for _, f := range fs {
		f.Close()
	}
}

// kill ends the runner and everything it started, and waits for it.
func (r *runner) kill() {
	syscall.Kill(-r.pid, syscall.SIGKILL)
	r.ctl.Close()
	select {
	case <-r.exited:
	case <-time.After(5 * time.Second):
	}
}

func (r *runner) stderrTail() string {
	r.tailMu.Lock()
	defer r.tailMu.Unlock()
	if len(r.tail) == 0 {
		return "no output"
	}
	return string(bytes.ToValidUTF8(r.tail, []byte("?")))
}

// readResults turns fd 4 into messages. A line that does not parse ends
// the channel: the runner is broken and will be killed.
func (r *runner) readResults(f *os.File) {
	defer close(r.results)
	defer f.Close()
	br := bufio.NewReaderSize(f, 64<<10)
	for {
		line, err := readLine(br, protocol.MaxCellResultBytes)
		if err != nil {
			return
		}
		m, err := parseRunnerLine(line)
		if err != nil {
			return
		}
		r.results <- m
	}
}

// readLine reads one '\n'-terminated line of at most max bytes.
func readLine(br *bufio.Reader, max int) ([]byte, error) {
	var line []byte
	for {
		chunk, err := br.ReadSlice('\n')
		if len(line)+len(chunk) > max+1 {
			return nil, errors.New("line too long")
		}
		line = append(line, chunk...)
		if err == nil {
			return line[:len(line)-1], nil
		}
		if err != bufio.ErrBufferFull {
			return nil, err
		}
	}
}

// pump streams one output pipe of the runner to the running cell (or
// nowhere between cells), taking out the end-of-cell mark.
func (r *runner) pump(f *os.File, t protocol.Type, marks chan struct{}) {
	defer r.pumps.Done()
	defer f.Close()
	buf := make([]byte, 64<<10)
	var pending []byte
	for {
		n, err := f.Read(buf)
		if n > 0 {
			pending = append(pending, buf[:n]...)
			for {
				i := bytes.Index(pending, r.mark)
				if i < 0 {
					break
				}
				r.emit(t, pending[:i])
				pending = append([]byte(nil), pending[i+len(r.mark):]...)
				select {
				case marks <- struct{}{}:
				default:
				}
			}
			keep := partialSuffix(pending, r.mark)
			r.emit(t, pending[:len(pending)-keep])
			pending = append([]byte(nil), pending[len(pending)-keep:]...)
		}
		if err != nil {
			r.emit(t, pending)
			return
		}
	}
}

// partialSuffix returns the length of the longest end of b that is a
// proper beginning of mark (it may be completed by the next read).
func partialSuffix(b, mark []byte) int {
	for k := min(len(b), len(mark)-1); k > 0; k-- {
		if bytes.Equal(b[len(b)-k:], mark[:k]) {
			return k
		}
	}
	return 0
}

func (r *runner) emit(t protocol.Type, b []byte) {
	if len(b) == 0 {
		return
	}
	if t == protocol.TStderr {
		r.tailMu.Lock()
		r.tail = append(r.tail, b...)
		if len(r.tail) > stderrTailBytes {
			r.tail = append([]byte(nil), r.tail[len(r.tail)-stderrTailBytes:]...)
		}
		r.tailMu.Unlock()
	}
	sink := r.sink.Load()
	if sink == nil {
		return // output between cells has no reader
	}
	// An error means the cell's connection is over: the output is lost.
	sink.s.sendAll(t, sink.stream, b)
}

// contextCreate starts a context's first runner.
func (s *server) contextCreate(stream uint32, req *protocol.ContextRequest) {
	s.contexts.mu.Lock()
	if _, dup := s.contexts.m[req.ID]; dup {
		s.contexts.mu.Unlock()
		s.sendError(stream, "exists", fmt.Errorf("context %s exists", req.ID))
		return
	}
	if len(s.contexts.m) >= protocol.MaxContexts {
		s.contexts.mu.Unlock()
		s.sendError(stream, "too_many", fmt.Errorf("at most %d contexts", protocol.MaxContexts))
		return
	}
	c := &codeContext{id: req.ID, language: req.Language, env: req.Env, memLimit: req.MemoryLimitBytes, created: time.Now()}
	c.busy.Add(1)
	defer c.busy.Add(-1)
	s.contexts.m[req.ID] = c // reserved while it starts
	s.contexts.mu.Unlock()
	c.cells.Lock()
	defer c.cells.Unlock()
	r, err := s.startRunner(c)
	if err != nil {
		s.contexts.mu.Lock()
		delete(s.contexts.m, req.ID)
		s.contexts.mu.Unlock()
		s.sendError(stream, "start_failed", err)
		return
	}
	c.mu.Lock()
	c.proc = r
	c.mu.Unlock()
	s.respond(stream, protocol.Response{PID: r.pid})
}

// contextRestart replaces a context's runner. A cell running in the old
// one ends as if the interpreter died.
func (s *server) contextRestart(stream uint32, req *protocol.ContextRequest) {
	c := s.contexts.get(req.ID)
	if c == nil {
		s.sendError(stream, "not_found", fmt.Errorf("no context %s", req.ID))
		return
	}
	c.busy.Add(1)
	defer c.busy.Add(-1)
	if old := c.current(); old != nil {
		old.kill()
	}
	c.cells.Lock()
	defer c.cells.Unlock()
	if old := c.current(); old != nil { // a restart that raced ours
		old.kill()
		c.forget(old)
	}
	r, err := s.startRunner(c)
	if err != nil {
		s.sendError(stream, "start_failed", err)
		return
	}
	c.mu.Lock()
	c.proc = r
	c.mu.Unlock()
	s.respond(stream, protocol.Response{PID: r.pid})
}

// contextClose ends a context.
func (s *server) contextClose(stream uint32, req *protocol.ContextRequest) {
	s.contexts.mu.Lock()
	c := s.contexts.m[req.ID]
	delete(s.contexts.m, req.ID)
	s.contexts.mu.Unlock()
	if c == nil {
		s.sendError(stream, "not_found", fmt.Errorf("no context %s", req.ID))
		return
	}
	if r := c.current(); r != nil {
		r.kill()
		c.forget(r)
	}
	s.respond(stream, protocol.Response{})
}

// cellHandler receives the host's frames for a running cell: a TSignal
// interrupts it. When its connection ends, a cell that is running
// finishes (its result is discarded) and one still waiting for the
// context is not run.
type cellHandler struct {
	c           *codeContext
	interrupted atomic.Bool
}

func (h *cellHandler) frame(f protocol.Frame) {
	if f.Type != protocol.TSignal {
		return
	}
	var m protocol.SignalRequest
	if protocol.Decode(f.Payload, &m) != nil {
		return
	}
	h.interrupted.Store(true)
	if r := h.c.current(); r != nil {
		syscall.Kill(r.pid, syscall.Signal(m.Signal))
	}
}

func (h *cellHandler) abort() { h.interrupted.Store(true) }

// contextRun runs one cell and sends its output, then its result.
func (s *server) contextRun(stream uint32, req *protocol.ContextRequest) {
	c := s.contexts.get(req.ID)
	if c == nil {
		s.sendError(stream, "not_found", fmt.Errorf("no context %s", req.ID))
		return
	}
	h := &cellHandler{c: c}
	s.setHandler(stream, h)
	defer s.setHandler(stream, nil)
	c.cells.Lock()
	defer c.cells.Unlock()
	if h.interrupted.Load() {
		s.sendError(stream, "interrupted", errors.New("interrupted before the cell started"))
		return
	}
	r := c.current()
	if r == nil {
		s.sendError(stream, "context_dead", fmt.Errorf("the %s interpreter of context %s has died; restart it", c.language, c.id))
		return
	}
	c.busy.Add(1)
	c.runs.Add(1)
	res := s.runCell(r, c, stream, req)
	c.busy.Add(-1)
	b, err := protocol.EncodeCellResult(res)
	if err != nil {
		s.sendError(stream, "too_large", err)
		return
	}
	if s.sendAll(protocol.TData, stream, b) == nil {
		s.send(protocol.Frame{Type: protocol.TDataEnd, Stream: stream})
	}
}

func (s *server) runCell(r *runner, c *codeContext, stream uint32, req *protocol.ContextRequest) *protocol.CellResult {
	for _, ch := range []chan struct{}{r.outMark, r.errMark} { // marks of an earlier cell
		select {
		case <-ch:
		default:
		}
	}
	r.sink.Store(&cellSink{s: s, stream: stream})
	defer r.sink.Store(nil)
	start := time.Now()
	res := &protocol.CellResult{}
	msg, _ := json.Marshal(map[string]string{"code": req.Code, "mark": string(r.mark)})
	if _, err := r.ctl.Write(append(msg, '\n')); err != nil {
		return s.died(r, c, res, start)
	}
	var timedOut atomic.Bool
	var timers []*time.Timer
	if req.TimeoutMS > 0 && req.TimeoutMS < int64(24*time.Hour/time.Millisecond) {
		d := time.Duration(req.TimeoutMS) * time.Millisecond
		timers = append(timers,
			time.AfterFunc(d, func() {
				timedOut.Store(true)
				syscall.Kill(r.pid, syscall.SIGINT)
			}),
			time.AfterFunc(d+interruptGrace, func() { syscall.Kill(-r.pid, syscall.SIGKILL) }))
	}
	defer func() {
		for _, t := range timers {
			t.Stop()
		}
	}()
	var m runnerMsg
	var ok bool
	select {
	case m, ok = <-r.results:
	case <-r.exited:
	}
	res.TimedOut = timedOut.Load()
	if !ok {
		return s.died(r, c, res, start)
	}
	deadline := time.NewTimer(markWait)
	defer deadline.Stop()
	for _, ch := range []chan struct{}{r.outMark, r.errMark} {
		select {
		case <-ch:
		case <-deadline.C:
		case <-r.exited:
		}
	}
	res.DurationMS = time.Since(start).Milliseconds()
	if m.Value != nil {
		res.Value = *m.Value
	}
	res.Error = m.Error
	res.Outputs = m.Outputs
	res.Dropped = m.Dropped
	protocol.Validate(res)
	return res
}

// died reports a runner that ended during a cell, and drops it: the
// context is dead until restarted.
func (s *core) died(r *runner, c *codeContext, res *protocol.CellResult, start time.Time) *protocol.CellResult {
	syscall.Kill(-r.pid, syscall.SIGKILL) // also a runner that broke its protocol
	select {
	case <-r.exited:
	case <-time.After(5 * time.Second):
	}
	c.forget(r)
	res.Died = true
	res.DurationMS = time.Since(start).Milliseconds()
	how := "ended"
	if ps := r.cmd.ProcessState; ps != nil {
		if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			how = "was killed by signal " + ws.Signal().String()
			if ws.Signal() == syscall.SIGKILL && res.TimedOut {
				how = "did not stop at the interrupt and was killed"
			}
		} else {
			how = fmt.Sprintf("exited with status %d", ps.ExitCode())
		}
	}
	res.Error = &protocol.CellError{
		Name:  "InterpreterDied",
		Value: fmt.Sprintf("the %s interpreter %s during the cell; restart the context to go on", c.language, how),
	}
	return res
}
