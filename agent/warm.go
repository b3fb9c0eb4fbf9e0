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

	"github.com/airlockhq/airlock/protocol"
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
	out     *outputTarget
	wg      *sync.WaitGroup
	outR    *os.File
	errR    *os.File
}

// interpreters maps a runtime to the argv[0] values it can stand in for.
var interpreters = map[string][]string{
	protocol.RuntimePython: {"python3", "python", "/usr/bin/python3"},
}

func (s *server) prepare(stream uint32, req *protocol.PrepareRequest) {
	s.mu.Lock()
	_, exists := s.warm[req.Runtime]
	s.mu.Unlock()
	if exists {
		s.sendError(stream, "exists", fmt.Errorf("a warm %s runtime is already prepared", req.Runtime))
		return
	}
	w, err := s.startWarm(req)
	if err != nil {
		s.sendError(stream, "invalid", err)
		return
	}
	s.mu.Lock()
	if _, dup := s.warm[req.Runtime]; dup { // a concurrent prepare won
		s.mu.Unlock()
		w.kill()
		s.procs.remove(w.cmd.Process.Pid)
		s.sendError(stream, "exists", fmt.Errorf("a warm %s runtime is already prepared", req.Runtime))
		return
	}
	s.warm[req.Runtime] = w
	s.mu.Unlock()
	s.respond(stream, protocol.Response{PID: w.cmd.Process.Pid})
}

func (s *server) startWarm(req *protocol.PrepareRequest) (*warmRuntime, error) {
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
	w := &warmRuntime{runtime: req.Runtime, env: req.Env, cmd: cmd, ctl: ctl, outR: outR, errR: errR, wg: &sync.WaitGroup{}}
	w.out = &outputTarget{s: s}
	// Tracked from now on, so shutdown kills it and the reaper leaves it.
	s.procs.procs[cmd.Process.Pid] = &execHandler{s: s, pid: cmd.Process.Pid}
	s.procs.mu.Unlock()
	w.wg.Add(2)
	go s.pipeOut(w.wg, w.out, protocol.TStdout, outR)
	go s.pipeOut(w.wg, w.out, protocol.TStderr, errR)

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
	w.ctl.Close()
	w.wg.Wait()
}

// takeWarm returns the prepared runtime that can run req, removing it, or
// nil when there is none (then the program is started afresh).
func (s *server) takeWarm(req *protocol.ExecRequest) *warmRuntime {
	if !req.Warm || req.Stdin || len(req.Argv) != 2 || !filepath.IsAbs(req.Argv[1]) {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
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
	pid := w.cmd.Process.Pid
	h := &execHandler{s: s, stream: stream, pid: pid}
	s.procs.add(pid, h)
	s.setHandler(stream, h)
	if _, err := w.ctl.Write(append(msg, '\n')); err != nil {
		s.setHandler(stream, nil)
		w.kill()
		s.procs.remove(pid)
		return false
	}
	w.ctl.Close()
	s.respond(stream, protocol.Response{PID: pid})
	w.out.attach(stream)
	go s.supervise(stream, h, w.cmd, w.wg, w.outR, w.errR, req.TimeoutMS)
	return true
}
