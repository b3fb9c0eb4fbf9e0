package protocol_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/agent/protocol"
)

// startAttach attaches to pid against the fake agent and acknowledges it
// with ackPID.
func startAttach(t *testing.T, c *protocol.Client, a *fakeAgent, pid, ackPID int, stdout, stderr io.Writer) (airlock.Process, uint32, error) {
	t.Helper()
	type started struct {
		p   airlock.Process
		err error
	}
	ch := make(chan started, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		p, err := c.Attach(ctx, pid, stdout, stderr)
		ch <- started{p, err}
	}()
	id, req := a.expectRequest()
	if req.Op != protocol.OpAttach || req.PID != pid {
		t.Fatalf("got request %+v", req)
	}
	a.respond(id, protocol.Response{PID: ackPID})
	select {
	case s := <-ch:
		return s.p, id, s.err
	case <-time.After(5 * time.Second):
		t.Fatal("Attach hung")
	}
	return nil, 0, nil
}

func TestClientAttach(t *testing.T) {
	c, a := newFake(t)
	a.hello()
	var stdout, stderr strings.Builder
	p, id, err := startAttach(t, c, a, 42, 42, &stdout, &stderr)
	if err != nil {
		t.Fatal(err)
	}
	if p.PID() != 42 {
		t.Fatalf("PID %d", p.PID())
	}
	if _, err := p.Write([]byte("x")); !errors.Is(err, protocol.ErrNoStdin) {
		t.Errorf("Write: got %v, want ErrNoStdin", err)
	}
	if err := p.CloseStdin(); !errors.Is(err, protocol.ErrNoStdin) {
		t.Errorf("CloseStdin: got %v, want ErrNoStdin", err)
	}
	if err := p.Signal(15); err != nil {
		t.Fatal(err)
	}
	if f := a.expect(protocol.TSignal); f.Stream != id {
		t.Fatalf("signal on stream %d, want %d", f.Stream, id)
	}
	a.send(protocol.Frame{Type: protocol.TStdout, Stream: id, Payload: []byte("retained ")})
	a.send(protocol.Frame{Type: protocol.TStderr, Stream: id, Payload: []byte("err")})
	a.send(protocol.Frame{Type: protocol.TStdout, Stream: id, Payload: []byte("live")})
	a.send(protocol.Frame{Type: protocol.TExit, Stream: id, Payload: []byte(`{"code":3,"stdout_dropped":7}`)})
	st, err := waitProcess(t, p)
	if err != nil || st.Code != 3 || st.StdoutDropped != 7 || st.StderrDropped != 0 {
		t.Fatalf("status %+v, %v", st, err)
	}
	if stdout.String() != "retained live" || stderr.String() != "err" {
		t.Fatalf("stdout %q stderr %q", stdout.String(), stderr.String())
	}
	checkHealthy(t, c, a)
}

// An agent that acknowledges another program than the one asked for is
// not believed.
func TestHostileAttachOtherPID(t *testing.T) {
	c, a := newFake(t)
	a.hello()
	if _, _, err := startAttach(t, c, a, 42, 43, nil, nil); err == nil {
		t.Fatal("attach to 42 accepted an answer for 43")
	}
	checkHealthy(t, c, a)
}

func TestClientAttachErrors(t *testing.T) {
	c, a := newFake(t)
	a.hello()
	if _, err := c.Attach(context.Background(), 0, nil, nil); err == nil {
		t.Error("attach to pid 0 was sent")
	}
	// Unknown PID.
	ch := async(func() (int64, error) {
		_, err := c.Attach(context.Background(), 9, nil, nil)
		return 0, err
	})
	id, _ := a.expectRequest()
	a.send(protocol.Frame{Type: protocol.TError, Stream: id, Payload: protocol.Encode(protocol.ErrorMessage{Code: "not_found", Message: "no"})})
	var re *protocol.RemoteError
	if r := wait(t, ch, "attach"); !errors.As(r.err, &re) || re.Code != "not_found" {
		t.Fatalf("got %v, want not_found", r.err)
	}
	// Taken over by another stream.
	p, id, err := startAttach(t, c, a, 9, 9, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	a.send(protocol.Frame{Type: protocol.TError, Stream: id, Payload: protocol.Encode(protocol.ErrorMessage{Code: "attached_elsewhere", Message: "attached elsewhere"})})
	if _, err := waitProcess(t, p); !errors.As(err, &re) || re.Code != "attached_elsewhere" {
		t.Fatalf("Wait: got %v, want attached_elsewhere", err)
	}
	checkHealthy(t, c, a)
}

func TestClientProcesses(t *testing.T) {
	c, a := newFake(t)
	a.hello()
	type got struct {
		ps  []protocol.ProcessInfo
		err error
	}
	list := func(payload string) got {
		ch := make(chan got, 1)
		go func() {
			ps, err := c.Processes(context.Background())
			ch <- got{ps, err}
		}()
		id, req := a.expectRequest()
		if req.Op != protocol.OpProcesses {
			t.Fatalf("request %+v", req)
		}
		a.send(protocol.Frame{Type: protocol.TResponse, Stream: id, Payload: []byte(payload)})
		select {
		case g := <-ch:
			return g
		case <-time.After(5 * time.Second):
			t.Fatal("Processes hung")
		}
		return got{}
	}
	g := list(`{"processes":[{"pid":5,"argv0":"sh","started_at_ms":10,"timeout_ms":100,"running":true,"attached":false},{"pid":6,"argv0":"x","started_at_ms":11,"timeout_ms":0,"running":false,"attached":false}]}`)
	if g.err != nil || len(g.ps) != 2 || g.ps[0] != (protocol.ProcessInfo{PID: 5, Argv0: "sh", StartedAtMS: 10, TimeoutMS: 100, Running: true}) || g.ps[1].PID != 6 {
		t.Fatalf("%+v, %v", g.ps, g.err)
	}
	if g := list(`{}`); g.err != nil || len(g.ps) != 0 {
		t.Fatalf("empty: %+v, %v", g.ps, g.err)
	}
	for _, bad := range []string{`{"processes":[{"pid":5},{"pid":5}]}`, `{"processes":[{"pid":-1}]}`, `{"processes":{}}`, `{"processes":[{"pid":1,"evil":1}]}`} {
		if g := list(bad); g.err == nil {
			t.Errorf("%s accepted: %+v", bad, g.ps)
		}
	}
	checkHealthy(t, c, a)
}

// startTerminalAttach attaches the terminal of pid from offset against
// the fake agent, which answers with resp.
func startTerminalAttach(t *testing.T, c *protocol.Client, a *fakeAgent, pid int, offset int64, resp protocol.Response, stdout io.Writer) (airlock.Process, int64, uint32, error) {
	t.Helper()
	type started struct {
		p    airlock.Process
		from int64
		err  error
	}
	ch := make(chan started, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		p, from, err := c.AttachTerminal(ctx, pid, offset, stdout)
		ch <- started{p, from, err}
	}()
	id, req := a.expectRequest()
	if req.Op != protocol.OpAttach || req.PID != pid || req.Offset != offset || !req.Stdin {
		t.Fatalf("got request %+v", req)
	}
	a.respond(id, resp)
	select {
	case s := <-ch:
		return s.p, s.from, id, s.err
	case <-time.After(5 * time.Second):
		t.Fatal("AttachTerminal hung")
	}
	return nil, 0, 0, nil
}

// TestClientAttachTerminal: a terminal attach asks for the output after
// an offset and takes input and resizes on its stream; an agent that
// resends output from before the offset breaks the protocol. Detach is a
// round trip naming the pid.
func TestClientAttachTerminal(t *testing.T) {
	c, a := newFake(t)
	a.hello()
	var out strings.Builder
	p, from, id, err := startTerminalAttach(t, c, a, 42, 100, protocol.Response{PID: 42, Offset: 120}, &out)
	if err != nil {
		t.Fatal(err)
	}
	if from != 120 {
		t.Fatalf("from %d, want 120", from)
	}
	if _, err := p.Write([]byte("ls\r")); err != nil {
		t.Fatalf("Write: %v", err)
	}
	if f := a.expect(protocol.TStdin); f.Stream != id || string(f.Payload) != "ls\r" {
		t.Fatalf("stdin frame %+v", f)
	}
	if err := p.(airlock.Resizer).Resize(100, 30); err != nil {
		t.Fatalf("Resize: %v", err)
	}
	f := a.expect(protocol.TResize)
	var m protocol.ResizeRequest
	if err := protocol.Decode(f.Payload, &m); err != nil || f.Stream != id || m != (protocol.ResizeRequest{Cols: 100, Rows: 30}) {
		t.Fatalf("resize frame %+v: %v", f, err)
	}
	a.send(protocol.Frame{Type: protocol.TStdout, Stream: id, Payload: []byte("file\r\n")})
	a.send(protocol.Frame{Type: protocol.TExit, Stream: id, Payload: []byte(`{"code":0}`)})
	if st, err := waitProcess(t, p); err != nil || st.Code != 0 || out.String() != "file\r\n" {
		t.Fatalf("status %+v, %v, out %q", st, err, out.String())
	}

	// Output from before the offset: a violation, and the attach fails.
	if _, _, _, err := startTerminalAttach(t, c, a, 43, 100, protocol.Response{PID: 43, Offset: 99}, nil); err == nil {
		t.Fatal("an attach that resends held output was taken")
	}

	// Bad arguments never reach the agent.
	if _, _, err := c.AttachTerminal(context.Background(), 0, 0, nil); err == nil {
		t.Fatal("AttachTerminal of pid 0 was sent")
	}
	if _, _, err := c.AttachTerminal(context.Background(), 5, -1, nil); err == nil {
		t.Fatal("AttachTerminal at a negative offset was sent")
	}

	done := make(chan error, 1)
	go func() { done <- c.Detach(context.Background(), 42) }()
	rid, req := a.expectRequest()
	if req.Op != protocol.OpDetach || req.PID != 42 || req.Stdin || req.Offset != 0 {
		t.Fatalf("detach request %+v", req)
	}
	a.respond(rid, protocol.Response{PID: 42})
	if err := <-done; err != nil {
		t.Fatalf("Detach: %v", err)
	}
	checkHealthy(t, c, a)
}
