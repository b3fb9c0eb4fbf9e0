package agent_test

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/agent"
	"github.com/airlockhq/airlock/agent/protocol"
)

// TestMain fails the run if goroutines or child processes started by the
// tests outlive them.
func TestMain(m *testing.M) {
	agent.RunHelperIfAsked() // programs started under a memory limit
	base := runtime.NumGoroutine()
	code := m.Run()
	// The fuzzing engine keeps a signal goroutine of its own.
	fuzzing := flag.Lookup("test.fuzz") != nil && flag.Lookup("test.fuzz").Value.String() != ""
	if code == 0 && !fuzzing {
		if err := checkLeftovers(base, 5*time.Second); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}
	os.Exit(code)
}

func checkLeftovers(base int, wait time.Duration) error {
	deadline := time.Now().Add(wait)
	for {
		n := runtime.NumGoroutine()
		kids := children()
		if n <= base && len(kids) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			buf = buf[:runtime.Stack(buf, true)]
			return fmt.Errorf("left over after the tests: child processes %v; %d goroutines (%d before):\n%s", kids, n, base, buf)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// children lists the live (not zombie) child processes of the test binary.
func children() []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		state, ppid, ok := procStat(pid)
		if ok && ppid == os.Getpid() && state != "Z" {
			pids = append(pids, pid)
		}
	}
	return pids
}

// procStat reads a process's state and parent from /proc.
func procStat(pid int) (state string, ppid int, ok bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return "", 0, false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return "", 0, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 2 {
		return "", 0, false
	}
	ppid, _ = strconv.Atoi(f[1])
	return f[0], ppid, true
}

// waitGone waits until pid has exited (gone, or a zombie nobody reaped yet).
func waitGone(t *testing.T, pid int, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		state, _, ok := procStat(pid)
		if !ok || state == "Z" {
			return
		}
		if time.Now().After(deadline) {
			syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("process %d still running after %v (state %s)", pid, within, state)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// harness is one agent serving one client over net.Pipe.
type harness struct {
	t      *testing.T
	c      *protocol.Client
	ws     string
	host   net.Conn
	agent  net.Conn
	cancel context.CancelFunc
	served chan error // Serve's result
}

// baseEnv is every program's environment in these tests.
var baseEnv = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "LC_ALL=C"}

// start runs an agent (Serve) on a fresh temporary workspace and connects
// to it. Everything is closed, and Serve's return awaited, at cleanup.
func start(t *testing.T) *harness {
	t.Helper()
	return startWith(t, agent.Serve)
}

// startWith is start with the given entry point.
func startWith(t *testing.T, run func(context.Context, io.ReadWriter, agent.Config) error) *harness {
	t.Helper()
	h := &harness{t: t, ws: t.TempDir(), served: make(chan error, 1)}
	h.host, h.agent = net.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	go func() {
		h.served <- run(ctx, h.agent, agent.Config{Workspace: h.ws, Env: baseEnv, Build: "test"})
	}()
	h.c = protocol.NewClient(h.host)
	t.Cleanup(func() {
		h.c.Close()
		cancel()
		h.agent.Close()
		select {
		case <-h.served:
		case <-time.After(5 * time.Second):
			t.Error("Serve did not return after its connection closed")
		}
	})
	hello, err := h.c.WaitHello(h.ctx(5 * time.Second))
	if err != nil {
		t.Fatalf("no hello: %v", err)
	}
	if hello.Version != protocol.Version || hello.Agent != "test" || hello.PID != os.Getpid() || hello.Token != "" {
		t.Fatalf("hello %+v", hello)
	}
	return h
}

// ctx returns a context that ends after d, or with the test.
func (h *harness) ctx(d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	h.t.Cleanup(cancel)
	return ctx
}

// exec starts a program; its output is collected into the returned run.
func (h *harness) exec(req protocol.ExecRequest) *run {
	h.t.Helper()
	r := &run{h: h}
	p, err := h.c.Exec(h.ctx(5*time.Second), req, &r.stdout, &r.stderr)
	if err != nil {
		h.t.Fatalf("Exec %v: %v", req.Argv, err)
	}
	r.p = p
	h.t.Cleanup(func() {
		// Only while it is still our child, so the PID is not reused.
		if _, ppid, ok := procStat(p.PID()); ok && p.PID() > 0 && ppid == os.Getpid() {
			syscall.Kill(-p.PID(), syscall.SIGKILL)
		}
	})
	return r
}

type run struct {
	h              *harness
	p              airlock.Process
	stdout, stderr bytes.Buffer // read only after wait
}

// wait waits for the program, failing the test if it takes longer than d.
func (r *run) wait(d time.Duration) protocol.ExitStatus {
	r.h.t.Helper()
	st, err := r.p.Wait(r.h.ctx(d))
	if errors.Is(err, context.DeadlineExceeded) {
		r.h.t.Fatalf("program did not end within %v", d)
	}
	if err != nil {
		r.h.t.Fatalf("Wait: %v", err)
	}
	return st
}

// sh runs a shell command to its end.
func (h *harness) sh(script string) (stdout, stderr string, st protocol.ExitStatus) {
	h.t.Helper()
	r := h.exec(protocol.ExecRequest{Argv: []string{"/bin/sh", "-c", script}})
	st = r.wait(10 * time.Second)
	return r.stdout.String(), r.stderr.String(), st
}

// healthy asserts the agent still answers promptly.
func (h *harness) healthy() *protocol.Health {
	h.t.Helper()
	type res struct {
		hl  *protocol.Health
		err error
	}
	ch := make(chan res, 1)
	go func() {
		hl, err := h.c.Health(h.ctx(3 * time.Second))
		ch <- res{hl, err}
	}()
	select {
	case r := <-ch:
		if r.err != nil {
			h.t.Fatalf("Health: %v", r.err)
		}
		return r.hl
	case <-time.After(4 * time.Second):
		h.t.Fatal("Health hung: the agent stopped serving")
	}
	return nil
}

// remoteCode returns the agent's error code, failing if err is not one.
func remoteCode(t *testing.T, err error) string {
	t.Helper()
	var re *protocol.RemoteError
	if !errors.As(err, &re) {
		t.Fatalf("got %v, want an agent error", err)
	}
	return re.Code
}

// noTempFiles asserts no upload temporary is left anywhere in dir.
func noTempFiles(t *testing.T, dir string) {
	t.Helper()
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && strings.HasPrefix(d.Name(), ".airlock-put-") {
			t.Errorf("temporary file left behind: %s", p)
		}
		return nil
	})
}
