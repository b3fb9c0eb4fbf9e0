package agent_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/airlockhq/airlock/agent"
	"github.com/airlockhq/airlock/agent/protocol"
)

func TestHealth(t *testing.T) {
	h := start(t)
	hl := h.healthy()
	if hl.UptimeMS < 0 || hl.Processes != 0 {
		t.Fatalf("health %+v", hl)
	}
	// The sleep is what is measured: uptime must grow with the clock.
	time.Sleep(20 * time.Millisecond)
	if later := h.healthy(); later.UptimeMS < 20 {
		t.Fatalf("uptime %d ms after 20 ms", later.UptimeMS)
	}
}

func TestShutdown(t *testing.T) {
	h := start(t)
	r := h.exec(protocol.ExecRequest{Argv: []string{"sleep", "30"}})
	if err := h.c.Shutdown(h.ctx(5 * time.Second)); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	select {
	case err := <-h.served:
		if !errors.Is(err, agent.ErrShutdown) {
			t.Fatalf("Serve returned %v, want ErrShutdown", err)
		}
		h.served <- err
	case <-time.After(5 * time.Second):
		t.Fatal("Serve did not return after a shutdown")
	}
	// The running program was ended with the agent.
	waitGone(t, r.p.PID(), 2*time.Second)
}

func TestServeContextCancel(t *testing.T) {
	h := start(t)
	r := h.exec(protocol.ExecRequest{Argv: []string{"sleep", "30"}})
	h.cancel()
	select {
	case err := <-h.served:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Serve returned %v, want Canceled", err)
		}
		h.served <- err
	case <-time.After(5 * time.Second):
		t.Fatal("Serve did not return after its context ended")
	}
	waitGone(t, r.p.PID(), 2*time.Second)
}

func TestServeConnectionClosed(t *testing.T) {
	h := start(t)
	r := h.exec(protocol.ExecRequest{Argv: []string{"sleep", "30"}})
	h.c.Close()
	select {
	case err := <-h.served:
		if err != nil {
			t.Fatalf("Serve returned %v, want nil at EOF", err)
		}
		h.served <- err
	case <-time.After(5 * time.Second):
		t.Fatal("Serve did not return after its connection closed")
	}
	waitGone(t, r.p.PID(), 2*time.Second)
}

func TestServeBadConfig(t *testing.T) {
	host, ag := net.Pipe()
	defer host.Close()
	defer ag.Close()
	for _, ws := range []string{"", "relative/dir"} {
		err := agent.Serve(context.Background(), ag, agent.Config{Workspace: ws})
		if err == nil || !strings.Contains(err.Error(), "workspace") {
			t.Errorf("workspace %q: got %v", ws, err)
		}
	}
}

// rawAgent starts an agent and returns the raw host end of its connection.
func rawAgent(t *testing.T) (net.Conn, chan error) {
	t.Helper()
	host, ag := net.Pipe()
	served := make(chan error, 1)
	ws := t.TempDir()
	go func() { served <- agent.Serve(context.Background(), ag, agent.Config{Workspace: ws, Env: baseEnv}) }()
	t.Cleanup(func() {
		host.Close()
		ag.Close()
		select {
		case <-served:
		case <-time.After(5 * time.Second):
			t.Error("Serve did not return")
		}
	})
	host.SetDeadline(time.Now().Add(10 * time.Second))
	f, err := protocol.ReadFrame(host)
	if err != nil || f.Type != protocol.THello || f.Stream != 0 {
		t.Fatalf("first frame %+v, %v; want hello", f, err)
	}
	var hello protocol.Hello
	if err := protocol.Decode(f.Payload, &hello); err != nil {
		t.Fatalf("hello: %v", err)
	}
	return host, served
}

// Bad requests get an error on their stream; the agent keeps serving.
func TestBadRequests(t *testing.T) {
	host, _ := rawAgent(t)
	bad := []string{
		`not json`,
		`{"op":"format"}`,
		`{"op":"exec"}`,
		`{"op":"exec","exec":{"argv":[]}}`,
		`{"op":"get","path":"../etc/passwd"}`,
		`{"op":"put","path":"/etc/x"}`,
		`{"op":"health","extra":1}`,
		`{"op":"health"}]`,
		`{"op":"channel","channel":{"path":"/` + strings.Repeat("x", 200) + `","token":"0123456789abcdef"}}`,
		`{"op":"channel","channel":{"path":"/run/a.sock","token":"short"}}`,
		`{"op":"attach","pid":999999999}`,
		`{"op":"attach","pid":0}`,
	}
	for i, payload := range bad {
		id := uint32(2*i + 1)
		if err := protocol.WriteFrame(host, protocol.Frame{Type: protocol.TRequest, Stream: id, Payload: []byte(payload)}); err != nil {
			t.Fatal(err)
		}
		f, err := protocol.ReadFrame(host)
		if err != nil {
			t.Fatal(err)
		}
		if f.Type != protocol.TError || f.Stream != id {
			t.Fatalf("%s: got %s on stream %d, want an error on %d", payload, f.Type, f.Stream, id)
		}
		var m protocol.ErrorMessage
		if err := protocol.Decode(f.Payload, &m); err != nil || m.Code == "" {
			t.Fatalf("%s: error message %q: %v", payload, f.Payload, err)
		}
	}
	// Frames for streams with no request, and host frames of every other
	// type, are ignored.
	for _, typ := range []protocol.Type{protocol.TStdin, protocol.TStdinClose, protocol.TSignal, protocol.TData, protocol.TDataEnd, protocol.TError, protocol.TStdout, protocol.TExit} {
		if err := protocol.WriteFrame(host, protocol.Frame{Type: typ, Stream: 999, Payload: []byte(`{"signal":9}`)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := protocol.WriteFrame(host, protocol.Frame{Type: protocol.TRequest, Stream: 1001, Payload: []byte(`{"op":"health"}`)}); err != nil {
		t.Fatal(err)
	}
	f, err := protocol.ReadFrame(host)
	if err != nil || f.Type != protocol.TResponse || f.Stream != 1001 {
		t.Fatalf("health after junk: %+v, %v", f, err)
	}
}

// A frame the agent cannot parse ends Serve with an error.
func TestServeBadFrame(t *testing.T) {
	host, served := rawAgent(t)
	go host.Write([]byte{0xee, 0, 0, 0, 1, 0, 0, 0, 0})
	select {
	case err := <-served:
		if !errors.Is(err, protocol.ErrBadType) {
			t.Fatalf("Serve returned %v, want ErrBadType", err)
		}
		served <- err
	case <-time.After(5 * time.Second):
		t.Fatal("Serve went on after a bad frame")
	}
}

// Two shutdown requests in a row must not crash the agent.
func TestDoubleShutdown(t *testing.T) {
	for i := range 50 {
		host, served := rawAgent(t)
		go func() {
			for {
				if _, err := protocol.ReadFrame(host); err != nil {
					return
				}
			}
		}()
		for id := uint32(1); id <= 5; id += 2 {
			req := protocol.Frame{Type: protocol.TRequest, Stream: id, Payload: protocol.Encode(protocol.Request{Op: protocol.OpShutdown})}
			go protocol.WriteFrame(host, req)
		}
		select {
		case err := <-served:
			if !errors.Is(err, agent.ErrShutdown) {
				t.Fatalf("round %d: Serve returned %v, want ErrShutdown", i, err)
			}
			served <- err
		case <-time.After(5 * time.Second):
			t.Fatalf("round %d: Serve did not return", i)
		}
	}
}

// Signals to a finished program's stream are ignored, not sent to a
// process group that may since belong to someone else.
func TestSignalAfterExit(t *testing.T) {
	h := start(t)
	r := h.exec(protocol.ExecRequest{Argv: []string{"true"}})
	r.wait(5 * time.Second)
	if err := r.p.Signal(int(syscall.SIGKILL)); err != nil {
		t.Fatal(err)
	}
	h.healthy()
}
