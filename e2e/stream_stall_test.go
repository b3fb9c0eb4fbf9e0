package e2e_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
)

// TestStalledStreamDoesNotStallSession runs a session exec that writes
// tens of MiB to stdout, streamed (Accept: text/event-stream) to a client
// that never reads, on a connection with a receive buffer as small as the
// kernel allows, against the real airlockd. The output is fed to the
// stream from the goroutine that pumps the agent's frames, which every
// call on the session shares, so a stream that waited for its client
// would stall them all once the kernel's buffers are full (and the
// program too, blocked on its stdout). Instead, file lists on the same
// session answer promptly all along, the program gets through all its
// output (it leaves a mark after it), a second exec answers promptly,
// the stalled handler ends by itself (its stream dropped, the response
// cut), and the program runs on to its end with its result recorded as
// usual.
func TestStalledStreamDoesNotStallSession(t *testing.T) {
	n := newTestNode(t, nodeOptions{name: "stall"})
	tmp, parent, runsc := n.dir, n.parent, n.runsc
	var conns []net.Conn
	t.Cleanup(func() { // before the node's cleanup (registered earlier)
		for _, c := range conns {
			c.Close()
		}
	})
	// No warm pool: the only sandbox is the session's.
	d := n.start(quiet...)
	key := n.key()
	c := newClient(t, d.url, key)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	sess, _, err := c.CreateSession(ctx, airlock.CreateSessionRequest{Image: "base"})
	if err != nil {
		t.Fatal(err)
	}

	// About 48 MiB of output as fast as the sandbox makes it, a mark
	// that all of it got out, then the program keeps running a while and
	// leaves a mark that it got to its end.
	const program = `head -c 36000000 /dev/zero | base64 -w 4096; touch flooded; sleep 5; echo finished > done.txt; echo bye`
	body := fmt.Sprintf(`{"shell": %q, "timeout_sec": 120}`, program)
	path := "/v1/sessions/" + sess.ID + "/exec"
	conn := postStalled(t, d.url, path, key, body)
	conns = append(conns, conn)

	// The exec runs.
	var execID string
	waitFor(t, time.Minute, "the streamed exec to run", func() bool {
		s, err := c.Session(ctx, sess.ID)
		if err != nil || len(s.Running) == 0 {
			return false
		}
		execID = s.Running[0].ExecutionID
		return true
	})
	t.Logf("streamed exec %s runs", execID)

	// Other calls on the same session answer promptly while the output
	// floods out, and all of it gets out though nobody reads the stream.
	const prompt = 20 * time.Second
	var slowest time.Duration
	lists := 0
	waitFor(t, 3*time.Minute, "the program to get all its output out", func() bool {
		start := time.Now()
		callCtx, callCancel := context.WithTimeout(ctx, prompt)
		defer callCancel()
		l, err := c.ListFiles(callCtx, sess.ID, "")
		if err != nil {
			t.Fatalf("list files while the stream is stalled: %v (after %v)", err, time.Since(start))
		}
		lists++
		slowest = max(slowest, time.Since(start))
		for _, f := range l.Entries {
			if f.Name == "flooded" {
				return true
			}
		}
		return false
	})
	t.Logf("%d file lists while the output flooded, the slowest in %v", lists, slowest.Round(time.Millisecond))
	start := time.Now()
	callCtx, callCancel := context.WithTimeout(ctx, prompt)
	e2, err := c.Exec(callCtx, sess.ID, airlock.SessionExecRequest{Shell: "echo second"})
	callCancel()
	if err != nil || e2.Stdout != "second\n" || e2.ExitCode != 0 {
		t.Fatalf("second exec while the stream is stalled: %+v, %v (after %v)", e2, err, time.Since(start))
	}
	t.Logf("second exec answered in %v", time.Since(start).Round(time.Millisecond))

	// The stalled handler ends by itself: its stream is dropped and the
	// request is logged as done, though the client never read a byte.
	waitFor(t, 2*time.Minute, "the stalled handler to end", func() bool {
		return logHas(d.logs(), `msg="event stream dropped`, "path="+path) &&
			logHas(d.logs(), `msg="http request"`, "path="+path, "method=POST")
	})
	t.Logf("handler ended: %s", logLine(d.logs(), `msg="event stream dropped`, "path="+path))

	// The program ran on to its end and is recorded as usual.
	var e *airlock.Execution
	waitFor(t, 2*time.Minute, "the streamed exec to be recorded", func() bool {
		e, err = c.Execution(ctx, execID)
		return err == nil && e.Status != airlock.StatusRunning
	})
	if e.Status != airlock.StatusCompleted || e.ExitCode != 0 || !e.StdoutTruncated || e.SessionID != sess.ID {
		t.Errorf("recorded exec: status %s, exit %d, stdout truncated %v, %d bytes, error %q", e.Status, e.ExitCode, e.StdoutTruncated, len(e.Stdout), e.Error)
	}
	var out strings.Builder
	if _, err := c.GetFile(ctx, sess.ID, "done.txt", &out); err != nil || out.String() != "finished\n" {
		t.Errorf("done.txt: %q, %v: the program did not run to its end", out.String(), err)
	}

	// The response was cut, not ended: reading what was buffered reaches
	// the end of the connection without an exit event.
	conn.SetReadDeadline(time.Now().Add(time.Minute))
	got, err := io.ReadAll(conn)
	if err != nil && !errors.Is(err, syscall.ECONNRESET) {
		t.Errorf("reading the cut stream: %v", err)
	}
	if !strings.HasPrefix(string(got), "HTTP/1.1 200 ") || !strings.Contains(string(got), "event: start") {
		t.Errorf("the stream did not begin: %.200q", got)
	}
	if strings.Contains(string(got), "event: exit") {
		t.Errorf("the dropped stream has an exit event")
	}
	t.Logf("the cut stream held %d bytes", len(got))

	// The session works on; then nothing is left on the host.
	if e3, err := c.Exec(ctx, sess.ID, airlock.SessionExecRequest{Shell: "cat done.txt"}); err != nil || e3.Stdout != "finished\n" {
		t.Errorf("exec after the drop: %+v, %v", e3, err)
	}
	if _, err := c.DeleteSession(ctx, sess.ID); err != nil {
		t.Errorf("delete session: %v", err)
	}
	d.stop(t)
	if after := observe(t, runsc, tmp, parent, 0); !after.empty() {
		t.Errorf("left after a clean stop: %s", after)
	}
}

// postStalled sends a streaming POST on a connection whose receive buffer
// is as small as the kernel allows, and never reads from it.
func postStalled(t *testing.T, base, path, key, body string) net.Conn {
	t.Helper()
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	dialer := net.Dialer{Timeout: 10 * time.Second, Control: func(network, address string, c syscall.RawConn) error {
		var serr error
		if err := c.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 1024)
		}); err != nil {
			return err
		}
		return serr
	}}
	conn, err := dialer.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	req := fmt.Sprintf("POST %s HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\n"+
		"Accept: text/event-stream\r\nContent-Length: %d\r\n\r\n%s", path, u.Host, key, len(body), body)
	if _, err := io.WriteString(conn, req); err != nil {
		conn.Close()
		t.Fatal(err)
	}
	return conn
}

// logLine returns the first line of log that has every one of parts.
func logLine(log string, parts ...string) string {
	for _, line := range strings.Split(log, "\n") {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(line, p)
		}
		if all {
			return line
		}
	}
	return ""
}

func logHas(log string, parts ...string) bool { return logLine(log, parts...) != "" }
