package gvisor

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/airlockhq/airlock/agent/protocol"
)

// Code in a sandbox can see its channel's socket and dial it. Callers
// that never prove themselves, or prove themselves with a wrong token,
// must not keep the real agent from being taken back: it is heard while
// they still hold their connections open.
func TestAcceptAgentHearsTheAgentPastSilentCallers(t *testing.T) {
	dir := t.TempDir()
	token, err := newChannel(dir)
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(chanDir(dir), channelSocket)
	type result struct {
		c   *protocol.Client
		err error
	}
	done := make(chan result, 1)
	start := time.Now()
	go func() {
		c, err := acceptAgent(context.Background(), dir, 20*time.Second)
		done <- result{c, err}
	}()

	dial := func() net.Conn {
		for {
			conn, err := net.Dial("unix", sock)
			if err == nil {
				return conn
			}
			if time.Since(start) > 10*time.Second {
				t.Fatalf("the channel socket did not listen: %v", err)
			}
			time.Sleep(10 * time.Millisecond) // poll interval until the listener exists
		}
	}
	// A caller past those heard at once is closed unheard, so its write
	// may fail (a broken pipe): that is the point, not an error.
	hello := func(conn net.Conn, tok string) {
		protocol.WriteFrame(conn, protocol.Frame{Type: protocol.THello, Payload: protocol.Encode(protocol.Hello{
			Version: protocol.Version, Agent: "test", PID: os.Getpid(), Token: tok,
		})})
	}
	// More silent callers than are heard at once, and one with a wrong
	// token; all keep their connections open.
	var silent []net.Conn
	for range helloParallel + 4 {
		silent = append(silent, dial())
	}
	wrong := dial()
	hello(wrong, "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA")
	defer func() {
		for _, c := range append(silent, wrong) {
			c.Close()
		}
	}()
	// The agent dials again and again, as the real one does, until it
	// is heard: once the silent callers' time to prove themselves is
	// out, it gets in.
	stop := make(chan struct{})
	agentDone := make(chan struct{})
	go func() {
		defer close(agentDone)
		var conns []net.Conn
		defer func() {
			for _, c := range conns {
				c.Close()
			}
		}()
		for {
			conn, err := net.Dial("unix", sock)
			if err == nil {
				conns = append(conns, conn)
				protocol.WriteFrame(conn, protocol.Frame{Type: protocol.THello, Payload: protocol.Encode(protocol.Hello{
					Version: protocol.Version, Agent: "test", PID: os.Getpid(), Token: token,
				})})
			}
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond): // the agent's redial interval
			}
		}
	}()
	defer func() { close(stop); <-agentDone }()

	select {
	case r := <-done:
		if r.err != nil {
			t.Fatalf("the agent was not taken back: %v", r.err)
		}
		r.c.Close()
		if took := time.Since(start); took > 3*helloTimeout {
			t.Errorf("taking the agent back took %v with silent callers waiting (each may take %v)", took, helloTimeout)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("acceptAgent did not return")
	}
}
