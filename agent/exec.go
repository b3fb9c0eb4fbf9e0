package agent

import (
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
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
	stdin  chan []byte // nil when the exec did not ask for stdin
	once   sync.Once
}

func (h *execHandler) frame(f protocol.Frame) {
	switch f.Type {
	case protocol.TStdin:
		if h.stdin != nil {
			h.stdin <- f.Payload
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
		h.once.Do(func() { close(h.stdin) })
	}
}

func (h *execHandler) abort() { syscall.Kill(-h.pid, syscall.SIGKILL) }

// exec starts a program and streams its output until it ends.
func (s *server) exec(ctx context.Context, stream uint32, req *protocol.ExecRequest) {
	cwd := s.cfg.Workspace
	if req.Cwd != "" {
		cwd = req.Cwd
		if !filepath.IsAbs(cwd) {
			cwd = filepath.Join(s.cfg.Workspace, cwd)
		}
	}
	cmd := exec.Command(req.Argv[0], req.Argv[1:]...)
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
		h.stdin = make(chan []byte, 16)
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
			for b := range h.stdin {
				if _, err := stdinW.Write(b); err != nil {
					for range h.stdin { // discard the rest
					}
					return
				}
			}
		}()
	}

	go func() {
		var wg sync.WaitGroup
		wg.Add(2)
		go s.pipeOut(&wg, stream, protocol.TStdout, outR)
		go s.pipeOut(&wg, stream, protocol.TStderr, errR)

		var timedOut bool
		var timer *time.Timer
		if req.TimeoutMS > 0 {
			timer = time.AfterFunc(time.Duration(req.TimeoutMS)*time.Millisecond, func() {
				timedOut = true
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
		h.closeStdin()
		s.procs.remove(h.pid)
		s.setHandler(stream, nil)
		st := exitStatus(cmd.ProcessState, werr)
		st.TimedOut = timedOut
		s.send(protocol.Frame{Type: protocol.TExit, Stream: stream, Payload: protocol.Encode(st)})
	}()
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
func (s *server) pipeOut(wg *sync.WaitGroup, stream uint32, t protocol.Type, r io.ReadCloser) {
	defer wg.Done()
	defer r.Close()
	buf := make([]byte, 64<<10)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			payload := make([]byte, n)
			copy(payload, buf[:n])
			if s.send(protocol.Frame{Type: t, Stream: stream, Payload: payload}) != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}
