package main

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/airlockhq/airlock/agent/protocol"
)

// The tests run this test binary as the agent: with runAsAgent set in its
// environment, TestMain runs main instead of the tests.
const runAsAgent = "AIRLOCK_AGENT_TEST_RUN_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(runAsAgent) == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// agentProc is the agent binary running as a child, its stdio on pipes.
type agentProc struct {
	cmd    *exec.Cmd
	stdin  *os.File // the host's end: writes go to the agent
	stdout *os.File // the host's end: reads come from the agent
	exited chan struct{}
}

// startAgent runs the agent with its stdio on fresh pipes. It is killed
// and waited for at cleanup.
func startAgent(t *testing.T) *agentProc {
	t.Helper()
	inR, inW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-workspace", t.TempDir())
	cmd.Env = append(os.Environ(), runAsAgent+"=1")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	inR.Close()
	outW.Close()
	a := &agentProc{cmd: cmd, stdin: inW, stdout: outR, exited: make(chan struct{})}
	go func() {
		cmd.Wait()
		close(a.exited)
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-a.exited
		inW.Close()
		outR.Close()
	})
	return a
}

// wait waits for the agent to exit and returns how.
func (a *agentProc) wait(t *testing.T) syscall.WaitStatus {
	t.Helper()
	select {
	case <-a.exited:
	case <-time.After(10 * time.Second):
		t.Fatal("the agent did not exit")
	}
	return a.cmd.ProcessState.Sys().(syscall.WaitStatus)
}

// pipes joins the host's ends of the agent's stdio into one stream.
type pipes struct {
	io.Reader
	io.Writer
	close func() error
}

func (p pipes) Close() error { return p.close() }

func (a *agentProc) client(t *testing.T) *protocol.Client {
	t.Helper()
	// Closing the client closes the agent's stdout only: its stdin stays
	// open, so a test sees what the agent makes of a broken stdout alone.
	c := protocol.NewClient(pipes{a.stdout, a.stdin, a.stdout.Close})
	t.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.WaitHello(ctx); err != nil {
		t.Fatalf("no hello: %v", err)
	}
	return c
}

func ctx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// An agent whose host stopped reading its stdout gets EPIPE, not a fatal
// SIGPIPE: without a channel it exits with an error status.
func TestStdoutClosedIsNotFatal(t *testing.T) {
	a := startAgent(t)
	a.stdout.Close() // before the agent writes its hello
	ws := a.wait(t)
	if ws.Signaled() || ws.ExitStatus() != 1 {
		t.Fatalf("agent ended with %v (signal %v), want exit status 1", ws.ExitStatus(), ws.Signal())
	}
}

// Programs the agent starts get SIGPIPE's default action back.
func TestProgramsKeepSIGPIPE(t *testing.T) {
	a := startAgent(t)
	c := a.client(t)
	var out strings.Builder
	p, err := c.Exec(ctx(t), protocol.ExecRequest{Argv: []string{"grep", "^SigIgn:", "/proc/self/status"}}, &out, nil)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := p.Wait(ctx(t)); err != nil || st.Code != 0 {
		t.Fatalf("status %+v, %v", st, err)
	}
	mask, err := strconv.ParseUint(strings.TrimSpace(strings.TrimPrefix(out.String(), "SigIgn:")), 16, 64)
	if err != nil {
		t.Fatalf("SigIgn %q: %v", out.String(), err)
	}
	if mask&(1<<(syscall.SIGPIPE-1)) != 0 {
		t.Fatalf("SIGPIPE is ignored in programs (SigIgn %x)", mask)
	}
	if err := c.Shutdown(ctx(t)); err != nil {
		t.Fatal(err)
	}
	if ws := a.wait(t); ws.Signaled() || ws.ExitStatus() != 0 {
		t.Fatalf("agent ended with %v after a shutdown", ws)
	}
}

// The host goes away while a retained program writes to its stdout
// stream: the agent survives the broken pipe, dials its channel, and the
// program is there.
func TestHostGoneThenChannel(t *testing.T) {
	a := startAgent(t)
	c := a.client(t)
	sock := filepath.Join(t.TempDir(), "a.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	const token = "0123456789abcdef"
	if err := c.SetChannel(ctx(t), sock, token); err != nil {
		t.Fatal(err)
	}
	p, err := c.Exec(ctx(t), protocol.ExecRequest{Argv: []string{"sh", "-c", "while :; do echo tick; sleep 0.02; done"}, RetainBytes: 64}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	a.stdout.Close() // the host is gone; the agent's next write breaks, its stdin stays open
	ln.(*net.UnixListener).SetDeadline(time.Now().Add(10 * time.Second))
	conn, err := ln.Accept()
	if err != nil {
		t.Fatalf("the agent did not dial its channel: %v", err)
	}
	c2 := protocol.NewClient(conn)
	defer c2.Close()
	hello, err := c2.WaitHello(ctx(t))
	if err != nil || !hello.TokenMatches(token) {
		t.Fatalf("hello %+v, %v", hello, err)
	}
	ps, err := c2.Processes(ctx(t))
	if err != nil || len(ps) != 1 || ps[0].PID != p.PID() || !ps[0].Running {
		t.Fatalf("processes %+v, %v", ps, err)
	}
	var out strings.Builder
	p2, err := c2.Attach(ctx(t), p.PID(), &out, nil)
	if err != nil {
		t.Fatal(err)
	}
	p2.Signal(int(syscall.SIGKILL))
	st, err := p2.Wait(ctx(t))
	if err != nil || st.Signal != int(syscall.SIGKILL) || !strings.HasPrefix(out.String(), "tick\n") {
		t.Fatalf("status %+v, %v, stdout %q", st, err, out.String())
	}
	if err := c2.Shutdown(ctx(t)); err != nil && !errors.Is(err, protocol.ErrClosed) {
		t.Fatal(err)
	}
	if ws := a.wait(t); ws.Signaled() || ws.ExitStatus() != 0 {
		t.Fatalf("agent ended with %v after a shutdown", ws)
	}
}
