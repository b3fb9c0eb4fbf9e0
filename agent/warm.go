package agent

import (
	"bufio"
	_ "embed"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/airlockhq/airlock/agent/protocol"
)

//go:embed runners/python_warm.py
var pythonWarm string

// warmReadyTimeout bounds how long a runtime may take to import its
// modules and say it is ready.
const warmReadyTimeout = 2 * time.Minute

// warmRuntime is an interpreter started ahead of any request, its modules
// imported, waiting on ctl for the path of the code to run. It serves one
// exec, then it is gone like any other program.
type warmRuntime struct {
	runtime string
	env     []string
	cmd     *exec.Cmd
	ctl     *os.File
	p       *program
	wg      *sync.WaitGroup
	outR    *os.File
	errR    *os.File
}

// interpreters maps a runtime to the argv[0] values it can stand in for.
var interpreters = map[string][]string{
	protocol.RuntimePython: {"python3", "python", "/usr/bin/python3"},
}

func (s *server) prepare(stream uint32, req *protocol.PrepareRequest) {
	s.warmMu.Lock()
	_, exists := s.warm[req.Runtime]
	s.warmMu.Unlock()
	if exists {
		s.sendError(stream, "exists", fmt.Errorf("a warm %s runtime is already prepared", req.Runtime))
		return
	}
	w, err := s.startWarm(req)
	if err != nil {
		s.sendError(stream, "invalid", err)
		return
	}
	s.warmMu.Lock()
	if _, dup := s.warm[req.Runtime]; dup { // a concurrent prepare won
		s.warmMu.Unlock()
		w.kill()
		s.procs.remove(w.cmd.Process.Pid)
		s.sendError(stream, "exists", fmt.Errorf("a warm %s runtime is already prepared", req.Runtime))
		return
	}
	s.warm[req.Runtime] = w
	s.warmMu.Unlock()
	s.respond(stream, protocol.Response{PID: w.cmd.Process.Pid})
}

func (s *core) startWarm(req *protocol.PrepareRequest) (*warmRuntime, error) {
	var argv []string
	switch req.Runtime {
	case protocol.RuntimePython:
		argv = append([]string{"python3", "-c", pythonWarm}, req.Preload...)
	}
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	ctl := os.NewFile(uintptr(fds[0]), "warm-ctl")
	child := os.NewFile(uintptr(fds[1]), "warm-ctl-child")
	defer child.Close()
	outR, outW, err := os.Pipe()
	if err != nil {
		ctl.Close()
		return nil, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		ctl.Close()
		outR.Close()
		outW.Close()
		return nil, err
	}
	env := append(append([]string{}, s.cfg.Env...), req.Env...)
	if req.Checkpoint {
		env = append(env, "AIRLOCK_WARM_TRIM=1")
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = s.cfg.Workspace
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = outW, errW
	cmd.ExtraFiles = []*os.File{child} // fd 3
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	s.procs.mu.Lock()
	err = cmd.Start()
	outW.Close()
	errW.Close()
	if err != nil {
		s.procs.mu.Unlock()
		ctl.Close()
		outR.Close()
		errR.Close()
		return nil, err
	}
	p := &program{pid: cmd.Process.Pid, waiting: true}
	w := &warmRuntime{runtime: req.Runtime, env: req.Env, cmd: cmd, ctl: ctl, p: p, outR: outR, errR: errR, wg: &sync.WaitGroup{}}
	// Tracked from now on, so shutdown kills it and the reaper leaves it.
	s.procs.procs[p.pid] = p
	s.procs.mu.Unlock()
	w.wg.Add(2)
	go pipeOut(w.wg, p, protocol.TStdout, outR)
	go pipeOut(w.wg, p, protocol.TStderr, errR)

	ready := make(chan error, 1)
	go func() {
		line, err := bufio.NewReader(ctl).ReadString('\n')
		if err == nil && line != "ready\n" {
			err = fmt.Errorf("unexpected %q", line)
		}
		ready <- err
	}()
	select {
	case err = <-ready:
	case <-time.After(warmReadyTimeout):
		err = fmt.Errorf("not ready after %s", warmReadyTimeout)
	}
	if err != nil {
		w.kill()
		s.procs.remove(cmd.Process.Pid)
		return nil, fmt.Errorf("warm %s runtime: %w", req.Runtime, err)
	}
	return w, nil
}

// kill ends a warm runtime that will never be used.
func (w *warmRuntime) kill() {
	syscall.Kill(-w.cmd.Process.Pid, syscall.SIGKILL)
	w.cmd.Wait()
	w.p.exited.Store(true)
	w.ctl.Close()
	w.wg.Wait()
}

// takeWarm returns the prepared runtime that can run req, removing it, or
// nil when there is none (then the program is started afresh).
func (s *server) takeWarm(req *protocol.ExecRequest) *warmRuntime {
	if !req.Warm || req.Stdin || len(req.Argv) != 2 || !filepath.IsAbs(req.Argv[1]) {
		return nil
	}
	s.warmMu.Lock()
	defer s.warmMu.Unlock()
	for rt, w := range s.warm {
		if slices.Contains(interpreters[rt], req.Argv[0]) && slices.Equal(w.env, req.Env) {
			delete(s.warm, rt)
			return w
		}
	}
	return nil
}

// execWarm hands a request to a prepared runtime. It returns false if the
// runtime turned out to be dead, so the caller starts the program afresh.
func (s *server) execWarm(stream uint32, req *protocol.ExecRequest, w *warmRuntime) bool {
	cwd := s.cfg.Workspace
	if req.Cwd != "" {
		cwd = req.Cwd
		if !filepath.IsAbs(cwd) {
			cwd = filepath.Join(s.cfg.Workspace, cwd)
		}
	}
	msg, _ := json.Marshal(map[string]string{"path": req.Argv[1], "cwd": cwd})
	p := w.p
	h := &procStream{s: s, stream: stream, p: p, exec: true}
	s.setHandler(stream, h)
	if _, err := w.ctl.Write(append(msg, '\n')); err != nil {
		s.setHandler(stream, nil)
		w.kill()
		s.procs.remove(p.pid)
		return false
	}
	w.ctl.Close()
	p.take(req)
	if req.RetainBytes > 0 {
		s.retained.add(p)
	}
	s.respond(stream, protocol.Response{PID: p.pid})
	p.mu.Lock()
	p.attachTo(h)
	p.mu.Unlock()
	go s.supervise(p, w.cmd, w.wg, w.outR, w.errR, req.TimeoutMS)
	return true
}
