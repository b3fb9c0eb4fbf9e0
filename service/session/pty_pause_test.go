package session_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/backend/gvisor"
	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/internal/testenv"
	"github.com/airlockhq/airlock/internal/teststack"
	"github.com/airlockhq/airlock/store/sqlite"
)

// termReader reads a terminal's WebSocket in the background; the test
// waits for conditions on what it has read.
type termReader struct {
	conn *client.PTYConn
	mu   sync.Mutex
	buf  bytes.Buffer
	err  error
	more chan struct{} // closed and replaced on every read
	done chan struct{} // closed when Read returned an error
}

func readTerm(conn *client.PTYConn) *termReader {
	r := &termReader{conn: conn, more: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(r.done)
		b := make([]byte, 4096)
		for {
			n, err := conn.Read(b)
			r.mu.Lock()
			r.buf.Write(b[:n])
			if err != nil {
				r.err = err
			}
			close(r.more)
			r.more = make(chan struct{})
			r.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	return r
}

// waitFor waits until the output holds s.
func (r *termReader) waitFor(t *testing.T, s string) {
	t.Helper()
	deadline := time.After(time.Minute)
	for {
		r.mu.Lock()
		ok, more, out, err := strings.Contains(r.buf.String(), s), r.more, r.buf.String(), r.err
		r.mu.Unlock()
		if ok {
			return
		}
		if err != nil {
			t.Fatalf("terminal ended (%v) before %q; output %q", err, s, out)
		}
		select {
		case <-more:
		case <-deadline:
			t.Fatalf("no %q in the terminal's output within a minute; output %q", s, out)
		}
	}
}

// count is how often s is in the output.
func (r *termReader) count(s string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Count(r.buf.String(), s)
}

// end waits for the reader to stop.
func (r *termReader) end(t *testing.T) {
	t.Helper()
	select {
	case <-r.done:
	case <-time.After(time.Minute):
		t.Fatal("the terminal did not end within a minute")
	}
}

// waitState polls the session until it is in state want.
func (s *stack) waitState(tc tenantClient, id string, want airlock.SessionState) {
	s.t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		got, err := tc.c.Session(ctxFor(s.t, time.Minute), id)
		if err != nil {
			s.t.Fatal(err)
		}
		if got.State == want {
			return
		}
		if got.State.Final() || time.Now().After(deadline) {
			s.t.Fatalf("session %s is %s, want %s", id, got.State, want)
		}
		time.Sleep(100 * time.Millisecond) // polling a condition
	}
}

// TestPTYSurvivesPause: a terminal outlives a pause, explicit or by the
// idle timeout. Its program runs on in the saved sandbox; an attach
// through the REST WebSocket resumes the session (auto_resume) and gets
// the scrollback from before the pause, typing and resizing work, a
// client that stayed attached through the pause sees the new output
// too (once, not the old again), and the terminal ends when its program
// exits. Another tenant's key and a revoked key are refused and resume
// nothing.
func TestPTYSurvivesPause(t *testing.T) {
	s := newStack(t, nil)
	ctx := ctxFor(t, 10*time.Minute)
	c := s.a.c
	revoked := s.newTenantKey(s.a)
	s.revokeKey(revoked)

	for _, by := range []string{"request", "idle"} {
		t.Logf("paused by %s", by)
		req := airlock.CreateSessionRequest{Image: "base", TimeoutS: 1800,
			Lifecycle: &airlock.SessionLifecycle{OnTimeout: airlock.OnTimeoutPause, AutoResume: true}}
		if by == "idle" {
			req.IdleTimeoutS = 3
		}
		sess := s.create(s.a, req)
		info, err := c.CreatePTY(ctx, sess.ID, airlock.CreatePTYRequest{Cols: 80, Rows: 24})
		if err != nil {
			t.Fatal(err)
		}
		stay, err := c.AttachPTY(ctx, sess.ID, info.PTYID)
		if err != nil {
			t.Fatal(err)
		}
		r1 := readTerm(stay)
		stay.Write([]byte("echo before-$((40+2))\n"))
		r1.waitFor(t, "before-42\r\n") // the output, not the echoed input

		if by == "request" {
			if _, err := c.PauseSession(ctx, sess.ID); err != nil {
				t.Fatal(err)
			}
		}
		s.waitState(s.a, sess.ID, airlock.SessionPaused)

		// Refused, and nothing resumed.
		attach := func(key string) (int, string, string) {
			return s.raw("GET", "/v1/sessions/"+sess.ID+"/pty/"+info.PTYID, key, "", nil,
				"Connection", "Upgrade", "Upgrade", "websocket", "Sec-WebSocket-Version", "13",
				"Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
		}
		if st, _, b := attach(s.b.key); st != http.StatusNotFound || !strings.Contains(b, "session-not-found") {
			t.Fatalf("attach with another tenant's key: %d %.300s", st, b)
		}
		if st, _, b := attach(revoked.secret); st != http.StatusUnauthorized {
			t.Fatalf("attach with a revoked key: %d %.300s", st, b)
		}
		if got, err := c.Session(ctx, sess.ID); err != nil || got.State != airlock.SessionPaused {
			t.Fatalf("after the refusals: %+v %v", got, err)
		}

		// The attach resumes it; the scrollback is from before the pause.
		start := time.Now()
		conn, err := c.AttachPTY(ctx, sess.ID, info.PTYID)
		if err != nil {
			t.Fatalf("attach to the paused session's terminal: %v", err)
		}
		t.Logf("attach to a terminal of the paused session: %s (resume included)", time.Since(start).Round(time.Millisecond))
		r := readTerm(conn)
		r.waitFor(t, "before-42\r\n")
		// (With the idle timeout of 3 s it may be paused again by now.)
		if got, err := c.Session(ctx, sess.ID); err != nil || (by == "request" && got.State != airlock.SessionReady) {
			t.Fatalf("after the attach: %+v %v", got, err)
		}
		conn.Write([]byte("echo after-$((6*7))\n"))
		r.waitFor(t, "after-42\r\n")
		if err := conn.Resize(132, 40); err != nil {
			t.Fatal(err)
		}
		conn.Write([]byte("stty size\n"))
		r.waitFor(t, "40 132\r\n")
		// The client attached through the pause got the new output once,
		// and the old output only once.
		r1.waitFor(t, "after-42\r\n")
		if n := r1.count("before-42\r\n"); n != 1 {
			t.Fatalf("the client attached through the pause got the old output %d times", n)
		}
		if n := r.count("before-42\r\n"); n != 1 {
			t.Fatalf("the new client got the scrollback %d times", n)
		}

		conn.Write([]byte("exit 5\n"))
		r.end(t)
		if code, ok := conn.ExitCode(); !ok || code != 5 {
			t.Fatalf("terminal exit: %d %v", code, ok)
		}
		r1.end(t)
		if _, err := c.AttachPTY(ctx, sess.ID, info.PTYID); err == nil {
			t.Fatal("a terminal whose program exited could be attached")
		}
		if _, err := c.DeleteSession(ctx, sess.ID); err != nil {
			t.Fatal(err)
		}
	}
	s.checkClean()
}

// TestPTYAttachAfterPauseBenchmark measures, for BENCHMARKS.md, the time
// from a terminal attach (REST WebSocket) to a paused session with
// auto_resume until the scrollback arrives, beside the same attach to the
// live session. A measurement, not a check: run it with
// AIRLOCK_KEEP_BENCH=1.
func TestPTYAttachAfterPauseBenchmark(t *testing.T) {
	if os.Getenv("AIRLOCK_KEEP_BENCH") != "1" {
		t.Skip("a measurement: set AIRLOCK_KEEP_BENCH=1 to run it")
	}
	s := newStack(t, nil)
	ctx := ctxFor(t, 20*time.Minute)
	c := s.a.c
	sess := s.create(s.a, airlock.CreateSessionRequest{Image: "base", TimeoutS: 3600,
		Lifecycle: &airlock.SessionLifecycle{OnTimeout: airlock.OnTimeoutPause, AutoResume: true}})
	info, err := c.CreatePTY(ctx, sess.ID, airlock.CreatePTYRequest{Cols: 80, Rows: 24})
	if err != nil {
		t.Fatal(err)
	}
	conn, err := c.AttachPTY(ctx, sess.ID, info.PTYID)
	if err != nil {
		t.Fatal(err)
	}
	r := readTerm(conn)
	conn.Write([]byte("echo mark-$((6*7))\n"))
	r.waitFor(t, "mark-42\r\n")
	conn.Close()
	r.end(t)
	attach := func() time.Duration {
		start := time.Now()
		conn, err := c.AttachPTY(ctx, sess.ID, info.PTYID)
		if err != nil {
			t.Fatal(err)
		}
		r := readTerm(conn)
		r.waitFor(t, "mark-42\r\n")
		took := time.Since(start)
		conn.Close()
		r.end(t)
		return took
	}
	var paused, live []time.Duration
	for range 7 {
		if _, err := c.PauseSession(ctx, sess.ID); err != nil {
			t.Fatal(err)
		}
		paused = append(paused, attach())
		live = append(live, attach())
	}
	for _, m := range []struct {
		name string
		d    []time.Duration
	}{{"attach to the paused session's terminal (auto-resume)", paused}, {"attach to the live session's terminal", live}} {
		slices.Sort(m.d)
		t.Logf("%s: p50 %s, max %s, all %v", m.name, m.d[len(m.d)/2].Round(time.Millisecond), m.d[len(m.d)-1].Round(time.Millisecond), m.d)
	}
	if _, err := c.DeleteSession(ctx, sess.ID); err != nil {
		t.Fatal(err)
	}
}

// TestPTYSurvivesRestart: a terminal outlives a restart of the server
// that keeps its sessions (Detach, then Recover on the same store): the
// next start finds its program in the agent's list and attaches it
// again; the scrollback is what the agent kept, typing and resizing
// work, and it ends when its program exits.
func TestPTYSurvivesRestart(t *testing.T) {
	testenv.RequireRoot(t)
	testenv.RequireRunsc(t)
	dir, err := os.MkdirTemp("", "airlock-ptyrestart-")
	if err != nil {
		t.Fatal(err)
	}
	parent := "airlock-test-" + testenv.RandomID()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	newBackend := func() *gvisor.Backend {
		b, err := gvisor.New(gvisor.Config{StateDir: dir, CgroupParent: parent, Logger: logger})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	// Registered first, so it runs last: nothing of any sandbox is left.
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		b := newBackend()
		b.Reconcile(cctx)
		if err := b.CheckClean(cctx); err != nil {
			t.Errorf("host not clean: %v", err)
		}
		b.RemoveAll()
		os.RemoveAll(dir)
	})
	ctx := ctxFor(t, 5*time.Minute)
	db, err := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(t.TempDir(), "airlock.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })

	first := newStackWith(t, teststack.Options{Backend: newBackend(), Store: db})
	c := first.a.c
	sess := first.create(first.a, airlock.CreateSessionRequest{Image: "base", TimeoutS: 3600})
	info, err := c.CreatePTY(ctx, sess.ID, airlock.CreatePTYRequest{Cols: 80, Rows: 24})
	if err != nil {
		t.Fatal(err)
	}
	conn, err := c.AttachPTY(ctx, sess.ID, info.PTYID)
	if err != nil {
		t.Fatal(err)
	}
	r := readTerm(conn)
	conn.Write([]byte("echo before-$((40+2))\n"))
	r.waitFor(t, "before-42\r\n")
	if err := first.mgr.Detach(ctx); err != nil {
		t.Fatal(err)
	}
	r.end(t) // the first server's clients are let go

	second := newBareStack(t, teststack.Options{Backend: newBackend(), Store: db, NoRecover: true})
	if rep, err := second.mgr.Recover(ctx); err != nil || rep.Reattached != 1 {
		t.Fatalf("recover: %+v %v", rep, err)
	}
	c2 := second.newClientFor(first.a)
	conn, err = c2.AttachPTY(ctx, sess.ID, info.PTYID)
	if err != nil {
		t.Fatalf("attach after the restart: %v", err)
	}
	r = readTerm(conn)
	r.waitFor(t, "before-42\r\n")
	conn.Write([]byte("echo after-$((6*7))\n"))
	r.waitFor(t, "after-42\r\n")
	if err := conn.Resize(100, 30); err != nil {
		t.Fatal(err)
	}
	conn.Write([]byte("stty size\n"))
	r.waitFor(t, "30 100\r\n")
	conn.Write([]byte("exit 4\n"))
	r.end(t)
	if code, ok := conn.ExitCode(); !ok || code != 4 {
		t.Fatalf("terminal exit: %d %v", code, ok)
	}
	if _, err := c2.DeleteSession(ctx, sess.ID); err != nil {
		t.Fatal(err)
	}
}
