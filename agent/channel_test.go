package agent_test

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/airlockhq/airlock/agent"
	"github.com/airlockhq/airlock/agent/protocol"
)

// channelHarness is an agent run with agent.Run, first over a pipe, and a
// unix listener in the test's directory for its channel.
type channelHarness struct {
	*harness
	sock  string
	token string
	ln    *net.UnixListener
}

// startChannel starts an agent and sets its channel.
func startChannel(t *testing.T) *channelHarness {
	t.Helper()
	h := &channelHarness{
		harness: startWith(t, agent.Run),
		sock:    filepath.Join(t.TempDir(), "a.sock"),
		token:   "tok-0123456789abcdef",
	}
	h.listen()
	if err := h.c.SetChannel(h.ctx(5*time.Second), h.sock, h.token); err != nil {
		t.Fatalf("SetChannel: %v", err)
	}
	return h
}

// listen makes a listener on the channel path, closed at cleanup.
func (h *channelHarness) listen() {
	h.t.Helper()
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: h.sock, Net: "unix"})
	if err != nil {
		h.t.Fatal(err)
	}
	h.ln = ln
	h.t.Cleanup(func() { ln.Close() })
}

// accept waits for the agent to dial the listener and checks the token in
// its hello; it returns the connection's client, closed at cleanup.
func (h *channelHarness) accept(token string) *protocol.Client {
	h.t.Helper()
	h.ln.SetDeadline(time.Now().Add(5 * time.Second))
	conn, err := h.ln.Accept()
	if err != nil {
		h.t.Fatalf("the agent did not dial its channel: %v", err)
	}
	c := protocol.NewClient(conn)
	h.t.Cleanup(func() { c.Close() })
	hello, err := c.WaitHello(h.ctx(5 * time.Second))
	if err != nil {
		h.t.Fatalf("no hello on the channel: %v", err)
	}
	if !hello.TokenMatches(token) || hello.PID != os.Getpid() || hello.Agent != "test" {
		h.t.Fatalf("hello on the channel %+v, want token %q", hello, token)
	}
	return c
}

// reconnect cuts the host's connection and serves the agent's next one.
func (h *channelHarness) reconnect() {
	h.t.Helper()
	h.c.Close()
	h.c = h.accept(h.token)
}

// processes lists the retained programs.
func (h *channelHarness) processes() []protocol.ProcessInfo {
	h.t.Helper()
	ps, err := h.c.Processes(h.ctx(5 * time.Second))
	if err != nil {
		h.t.Fatalf("Processes: %v", err)
	}
	return ps
}

// waitEnded waits until every listed program has ended.
func (h *channelHarness) waitEnded(n int) []protocol.ProcessInfo {
	h.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		ps := h.processes()
		ended := 0
		for _, p := range ps {
			if !p.Running {
				ended++
			}
		}
		if len(ps) == n && ended == n {
			return ps
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("processes %+v, want %d ended", ps, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// attach reads a retained program to its end.
func (h *channelHarness) attach(pid int) (stdout, stderr string, st protocol.ExitStatus) {
	h.t.Helper()
	var out, errb bytes.Buffer
	p, err := h.c.Attach(h.ctx(5*time.Second), pid, &out, &errb)
	if err != nil {
		h.t.Fatalf("Attach %d: %v", pid, err)
	}
	st, err = p.Wait(h.ctx(5 * time.Second))
	if err != nil {
		h.t.Fatalf("Wait after attach: %v", err)
	}
	return out.String(), errb.String(), st
}

// waitFile waits until a file exists in the workspace.
func (h *harness) waitFile(name string) {
	h.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, err := os.Stat(filepath.Join(h.ws, name)); err == nil {
			return
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("%s never appeared", name)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A retained program runs on while no host is connected: its output
// before and after the cut, and its exit, reach the next host.
func TestChannelRetainedExec(t *testing.T) {
	h := startChannel(t)
	r := h.exec(protocol.ExecRequest{
		Argv: []string{"sh", "-c", `echo before; echo err1 >&2; cat >/dev/null; echo after; echo err2 >&2; touch printed
			while [ ! -e go ]; do sleep 0.02; done; echo end; exit 3`},
		Stdin: true, RetainBytes: 1 << 20, TimeoutMS: 60_000, Tag: "exec-1",
	})
	begin := time.Now()
	h.reconnect() // the cut closes its stdin: cat ends
	if _, err := r.p.Wait(h.ctx(5 * time.Second)); !errors.Is(err, protocol.ErrClosed) {
		t.Fatalf("exec on the cut connection: got %v, want ErrClosed", err)
	}
	h.waitFile("printed")

	ps := h.processes()
	if len(ps) != 1 {
		t.Fatalf("processes %+v, want one", ps)
	}
	if p := ps[0]; p.PID != r.p.PID() || p.Argv0 != "sh" || p.Tag != "exec-1" || p.TimeoutMS != 60_000 || !p.Running || p.Attached ||
		p.StartedAtMS < begin.Add(-5*time.Second).UnixMilli() || p.StartedAtMS > time.Now().UnixMilli() {
		t.Fatalf("process %+v", p)
	}

	var out, errb bytes.Buffer
	p, err := h.c.Attach(h.ctx(5*time.Second), r.p.PID(), &out, &errb)
	if err != nil {
		t.Fatal(err)
	}
	if ps := h.processes(); len(ps) != 1 || !ps[0].Attached || !ps[0].Running {
		t.Fatalf("processes while attached %+v", ps)
	}
	if err := os.WriteFile(filepath.Join(h.ws, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	st, err := p.Wait(h.ctx(5 * time.Second))
	if err != nil || st.Code != 3 || st.StdoutDropped != 0 || st.StderrDropped != 0 {
		t.Fatalf("status %+v, %v", st, err)
	}
	if out.String() != "before\nafter\nend\n" || errb.String() != "err1\nerr2\n" {
		t.Fatalf("stdout %q stderr %q", out.String(), errb.String())
	}
	if ps := h.processes(); len(ps) != 0 {
		t.Fatalf("processes after the exit was delivered: %+v", ps)
	}
	_, err = h.c.Attach(h.ctx(5*time.Second), r.p.PID(), nil, nil)
	if code := remoteCode(t, err); code != "not_found" {
		t.Fatalf("attach after the exit was delivered: %s", code)
	}
}

// Programs that end while no host is connected, by themselves or by their
// timeout, are reported to the next host.
func TestChannelExitWhileDisconnected(t *testing.T) {
	h := startChannel(t)
	r1 := h.exec(protocol.ExecRequest{
		Argv:  []string{"sh", "-c", `echo out; echo errout >&2; cat >/dev/null; echo bye; exit 7`},
		Stdin: true, RetainBytes: 1 << 10,
	})
	r2 := h.exec(protocol.ExecRequest{Argv: []string{"sleep", "30"}, RetainBytes: 1 << 10, TimeoutMS: 300})
	h.reconnect()
	h.waitEnded(2)
	out, errOut, st := h.attach(r1.p.PID())
	if out != "out\nbye\n" || errOut != "errout\n" || st.Code != 7 || st.TimedOut {
		t.Fatalf("first: stdout %q stderr %q status %+v", out, errOut, st)
	}
	if _, _, st := h.attach(r2.p.PID()); !st.TimedOut || st.Signal != int(syscall.SIGKILL) {
		t.Fatalf("second: status %+v, want timed out", st)
	}
	if ps := h.processes(); len(ps) != 0 {
		t.Fatalf("processes %+v", ps)
	}
	_, err := h.c.Attach(h.ctx(5*time.Second), 1<<30, nil, nil)
	if code := remoteCode(t, err); code != "not_found" {
		t.Fatalf("attach to an unknown pid: %s", code)
	}
}

// Programs without RetainBytes end with their connection; retained ones
// run on, take signals on an attach stream, and end at a shutdown.
func TestChannelUnretainedKilled(t *testing.T) {
	h := startChannel(t)
	plain := h.exec(protocol.ExecRequest{Argv: []string{"sleep", "30"}})
	kept := h.exec(protocol.ExecRequest{Argv: []string{"sleep", "30"}, RetainBytes: 1})
	other := h.exec(protocol.ExecRequest{Argv: []string{"sleep", "30"}, RetainBytes: 1})
	h.reconnect()
	waitGone(t, plain.p.PID(), 2*time.Second)
	ps := h.processes()
	if len(ps) != 2 || ps[0].PID != kept.p.PID() || !ps[0].Running || ps[1].PID != other.p.PID() {
		t.Fatalf("processes %+v", ps)
	}
	if state, _, ok := procStat(kept.p.PID()); !ok || state == "Z" {
		t.Fatalf("retained program gone (state %q)", state)
	}
	p, err := h.c.Attach(h.ctx(5*time.Second), kept.p.PID(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Signal(int(syscall.SIGTERM)); err != nil {
		t.Fatal(err)
	}
	if st, err := p.Wait(h.ctx(5 * time.Second)); err != nil || st.Signal != int(syscall.SIGTERM) {
		t.Fatalf("status %+v, %v", st, err)
	}

	if err := h.c.Shutdown(h.ctx(5 * time.Second)); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-h.served:
		if !errors.Is(err, agent.ErrShutdown) {
			t.Fatalf("Run returned %v, want ErrShutdown", err)
		}
		h.served <- err
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after a shutdown on the channel")
	}
	waitGone(t, other.p.PID(), 2*time.Second)
}

// A code context and its variables outlive the connection; a cell
// running at the cut finishes.
func TestChannelContextSurvives(t *testing.T) {
	needInterpreter(t, "python3")
	h := startChannel(t)
	if _, err := h.c.CreateContext(h.ctx(30*time.Second), protocol.ContextRequest{ID: "py", Language: "python"}); err != nil {
		t.Fatal(err)
	}
	if res, _, _ := h.cell("py", "x = 41", 0); res.Error != nil {
		t.Fatalf("cell: %+v", res)
	}
	started := make(chan struct{})
	ran := make(chan error, 1)
	go func() {
		var once bool
		w := writerFunc(func(b []byte) (int, error) {
			if !once {
				once = true
				close(started)
			}
			return len(b), nil
		})
		_, err := h.c.RunCell(context.Background(), "py", "import time\nprint('go', flush=True)\ntime.sleep(0.3)\ny = x + 1", 0, w, nil)
		ran <- err
	}()
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("the cell did not start")
	}
	cs, err := h.c.ListContexts(h.ctx(5 * time.Second))
	if err != nil || len(cs) != 1 || cs[0].State != protocol.ContextBusy || cs[0].Runs != 2 {
		t.Fatalf("contexts during the cell %+v, %v", cs, err)
	}
	h.reconnect()
	if err := <-ran; !errors.Is(err, protocol.ErrClosed) {
		t.Fatalf("cell on the cut connection: got %v, want ErrClosed", err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		cs, err = h.c.ListContexts(h.ctx(5 * time.Second))
		if err != nil {
			t.Fatal(err)
		}
		if len(cs) == 1 && cs[0].State == protocol.ContextIdle {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("contexts %+v, want py idle", cs)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if c := cs[0]; c.ID != "py" || c.Language != protocol.ContextPython || c.Runs != 2 || c.CreatedAtMS <= 0 {
		t.Fatalf("context %+v", c)
	}
	if res, _, _ := h.cell("py", "(x, y)", 0); res.Value != "(41, 42)" {
		t.Fatalf("after the reconnect: %+v", res)
	}
}

// The agent dials again after every cut: a host that hangs up at once,
// and a new listener on the same path after the old socket file was
// removed, are reached; a new channel token replaces the old one.
func TestChannelRedial(t *testing.T) {
	h := startChannel(t)
	h.reconnect()
	h.healthy()
	token2 := strings.Repeat("Z", protocol.MaxTokenBytes)
	if err := h.c.SetChannel(h.ctx(5*time.Second), h.sock, token2); err != nil {
		t.Fatal(err)
	}
	h.ln.Close() // before the cut, so the agent's first dial finds no socket
	if _, err := os.Lstat(h.sock); !os.IsNotExist(err) {
		t.Fatalf("socket file still there: %v", err)
	}
	h.c.Close()
	h.listen()
	h.ln.SetDeadline(time.Now().Add(5 * time.Second))
	conn, err := h.ln.Accept()
	if err != nil {
		t.Fatalf("the agent did not dial the new listener: %v", err)
	}
	conn.Close() // hang up at once
	h.c = h.accept(token2)
	h.healthy()
}

// Retained output beyond RetainBytes is dropped and counted, on the live
// stream and for an attach.
func TestChannelRetainLimit(t *testing.T) {
	h := startChannel(t)
	r := h.exec(protocol.ExecRequest{Argv: []string{"sh", "-c", "head -c 3000 /dev/zero; printf 12345 >&2"}, RetainBytes: 1000})
	st := r.wait(5 * time.Second)
	if r.stdout.Len() != 3000 || r.stderr.String() != "12345" || st.StdoutDropped != 2000 || st.StderrDropped != 0 {
		t.Fatalf("live: %d bytes, stderr %q, status %+v", r.stdout.Len(), r.stderr.String(), st)
	}
	r = h.exec(protocol.ExecRequest{
		Argv:  []string{"sh", "-c", `cat >/dev/null; head -c 5000 /dev/zero | tr '\0' a; printf 0123456789 >&2`},
		Stdin: true, RetainBytes: 1000,
	})
	h.reconnect()
	h.waitEnded(1)
	out, errOut, st := h.attach(r.p.PID())
	if out != strings.Repeat("a", 1000) || errOut != "0123456789" || st.StdoutDropped != 4000 || st.StderrDropped != 0 || st.Code != 0 {
		t.Fatalf("attach: %d bytes, stderr %q, status %+v", len(out), errOut, st)
	}
}

// Without a channel the agent ends with its first stream, as before,
// retained programs too.
func TestRunWithoutChannel(t *testing.T) {
	h := startWith(t, agent.Run)
	kept := h.exec(protocol.ExecRequest{Argv: []string{"sleep", "30"}, RetainBytes: 1 << 10})
	plain := h.exec(protocol.ExecRequest{Argv: []string{"sleep", "30"}})
	h.c.Close()
	select {
	case err := <-h.served:
		if err != nil {
			t.Fatalf("Run returned %v, want nil at EOF", err)
		}
		h.served <- err
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return at EOF without a channel")
	}
	waitGone(t, kept.p.PID(), 2*time.Second)
	waitGone(t, plain.p.PID(), 2*time.Second)
}

// Attaching takes a program over from the stream that read it: the exec
// stream (whose stdin closes) and then another attach stream.
func TestAttachTakeover(t *testing.T) {
	h := start(t)
	r := h.exec(protocol.ExecRequest{Argv: []string{"sh", "-c", "echo a; cat; echo b"}, Stdin: true, RetainBytes: 1 << 10})
	var out bytes.Buffer
	p, err := h.c.Attach(h.ctx(5*time.Second), r.p.PID(), &out, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = r.p.Wait(h.ctx(5 * time.Second))
	if code := remoteCode(t, err); code != "attached_elsewhere" {
		t.Fatalf("exec stream: %s", code)
	}
	if st, err := p.Wait(h.ctx(5 * time.Second)); err != nil || st.Code != 0 || out.String() != "a\nb\n" {
		t.Fatalf("attach: %+v, %v, stdout %q", st, err, out.String())
	}

	r = h.exec(protocol.ExecRequest{Argv: []string{"sh", "-c", "echo a; while [ ! -e go ]; do sleep 0.02; done; echo b"}, RetainBytes: 1 << 10})
	first, err := h.c.Attach(h.ctx(5*time.Second), r.p.PID(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	out.Reset()
	second, err := h.c.Attach(h.ctx(5*time.Second), r.p.PID(), &out, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = first.Wait(h.ctx(5 * time.Second))
	if code := remoteCode(t, err); code != "attached_elsewhere" {
		t.Fatalf("first attach: %s", code)
	}
	if _, err := second.Write([]byte("x")); !errors.Is(err, protocol.ErrNoStdin) {
		t.Fatalf("Write to an attached process: %v", err)
	}
	os.WriteFile(filepath.Join(h.ws, "go"), nil, 0o644)
	if st, err := second.Wait(h.ctx(5 * time.Second)); err != nil || st.Code != 0 || out.String() != "a\nb\n" {
		t.Fatalf("second attach: %+v, %v, stdout %q", st, err, out.String())
	}
	// An unretained program cannot be attached.
	plain := h.exec(protocol.ExecRequest{Argv: []string{"sleep", "30"}})
	_, err = h.c.Attach(h.ctx(5*time.Second), plain.p.PID(), nil, nil)
	if code := remoteCode(t, err); code != "not_found" {
		t.Fatalf("attach to an unretained program: %s", code)
	}
	plain.p.Signal(int(syscall.SIGKILL))
	plain.wait(5 * time.Second)
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }
