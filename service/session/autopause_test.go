package session_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/teststack"
	"github.com/airlockhq/airlock/node"
	"github.com/airlockhq/airlock/service/session"
	"github.com/airlockhq/airlock/service/webhook"
)

// hookReceiver is a loopback webhook receiver that verifies every
// signature with the secret its webhook was given.
type hookReceiver struct {
	*httptest.Server
	mu     sync.Mutex
	secret []byte
	events []map[string]any
	bad    int
	more   chan struct{}
}

func newHookReceiver(t *testing.T) *hookReceiver {
	r := &hookReceiver{more: make(chan struct{}, 64)}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		defer r.mu.Unlock()
		if webhook.Verify(req.Header.Get(webhook.SignatureHeader), r.secret, body, time.Now(), 5*time.Minute) != nil {
			r.bad++
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		var m map[string]any
		json.Unmarshal(body, &m)
		r.events = append(r.events, m)
		w.WriteHeader(http.StatusNoContent)
		select {
		case r.more <- struct{}{}:
		default:
		}
	}))
	t.Cleanup(r.Close)
	return r
}

// register makes a webhook of tc's that goes to r.
func (s *stack) register(tc tenantClient, r *hookReceiver) {
	s.t.Helper()
	status, _, body := s.raw("POST", "/v1/webhooks", tc.key, "application/json", stringsReader(`{"url": "`+r.URL+`/hook"}`))
	if status != http.StatusCreated {
		s.t.Fatalf("create webhook: %d %s", status, body)
	}
	var w airlock.Webhook
	json.Unmarshal([]byte(body), &w)
	r.mu.Lock()
	r.secret = []byte(w.Secret)
	r.mu.Unlock()
}

// waitTypes waits until r got n events and returns their types.
func (r *hookReceiver) waitTypes(t *testing.T, n int) []string {
	t.Helper()
	deadline := time.After(time.Minute)
	for {
		r.mu.Lock()
		var types []string
		for _, e := range r.events {
			types = append(types, e["type"].(string))
		}
		bad := r.bad
		r.mu.Unlock()
		if bad > 0 {
			t.Fatalf("%d deliveries with a bad signature", bad)
		}
		if len(types) >= n {
			return types
		}
		select {
		case <-r.more:
		case <-deadline:
			t.Fatalf("webhook got %v, want %d events", types, n)
		}
	}
}

// A session with lifecycle on_timeout pause and auto_resume is paused
// when it sits idle, and the next exec resumes it: files written before
// the pause (fsynced or not) and a Python context's variables are
// intact. Its events (created, paused, resumed, ended) are in the feed
// and reach the tenant's webhook in order, signed; tenant b's webhook
// gets none of them.
func TestIdlePauseAutoResume(t *testing.T) {
	s := newStackWith(t, teststack.Options{Node: func(c *node.Config) {
		c.Webhooks.AllowPrivate = true // the receivers are on loopback
		c.Webhooks.Interval = 50 * time.Millisecond
	}})
	ctx := ctxFor(t, 8*time.Minute)
	ra, rb := newHookReceiver(t), newHookReceiver(t)
	s.register(s.a, ra)
	s.register(s.b, rb)
	c := s.a.c

	sess := s.create(s.a, airlock.CreateSessionRequest{TimeoutS: 1800, IdleTimeoutS: 3,
		Lifecycle: &airlock.SessionLifecycle{OnTimeout: airlock.OnTimeoutPause, AutoResume: true}})
	if sess.Lifecycle.OnTimeout != airlock.OnTimeoutPause || !sess.Lifecycle.AutoResume {
		t.Fatalf("lifecycle not kept: %+v", sess.Lifecycle)
	}
	write := s.shell(s.a, sess.ID, `set -e; cd /workspace
printf 'fsynced-%s' 1 > synced.txt; python3 -c 'import os; f=open("synced.txt","a"); f.write("-more"); f.flush(); os.fsync(f.fileno())'
printf 'not-synced' > unsynced.txt
head -c 5000000 /dev/urandom > blob.bin
sha256sum synced.txt unsynced.txt blob.bin`)
	if write.ExitCode != 0 {
		t.Fatalf("write: %d %s", write.ExitCode, write.Stderr)
	}
	py, err := c.CreateContext(ctx, sess.ID, airlock.ContextPython)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.RunCell(ctx, sess.ID, py.ID, airlock.RunCellRequest{Code: "kept = {'n': 42, 'l': [1, 2, 3]}"}); err != nil {
		t.Fatal(err)
	}

	// Idle for 3 s: the reaper pauses it.
	deadline := time.Now().Add(2 * time.Minute)
	for {
		got, err := c.Session(ctx, sess.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.State == airlock.SessionPaused {
			break
		}
		if got.State.Final() || time.Now().After(deadline) {
			t.Fatalf("not paused: %+v", got)
		}
		time.Sleep(100 * time.Millisecond) // polling a condition
	}

	// The next request resumes it and waits for it.
	start := time.Now()
	read, err := c.Exec(ctx, sess.ID, airlock.SessionExecRequest{Shell: "cd /workspace && sha256sum synced.txt unsynced.txt blob.bin"})
	took := time.Since(start)
	if err != nil {
		t.Fatalf("exec on a paused session: %v", err)
	}
	t.Logf("auto-resume: the first request to the paused session answered after %s", took)
	if read.ExitCode != 0 || read.Stdout != write.Stdout {
		t.Fatalf("files after the pause:\n%s\nwant\n%s", read.Stdout, write.Stdout)
	}
	cell, err := c.RunCell(ctx, sess.ID, py.ID, airlock.RunCellRequest{Code: "print(kept['n'], sum(kept['l']))"})
	if err != nil || strings.TrimSpace(cell.Stdout) != "42 6" {
		t.Fatalf("context after the pause: %+v %v", cell, err)
	}
	if _, err := c.DeleteSession(ctx, sess.ID); err != nil {
		t.Fatal(err)
	}

	want := []string{airlock.EventSessionCreated, airlock.EventSessionPaused, airlock.EventSessionResumed, airlock.EventSessionEnded}
	if got := ra.waitTypes(t, 4); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("webhook got %v, want %v", got, want)
	}
	ra.mu.Lock()
	if ra.events[1]["reason"] != "idle" || ra.events[2]["reason"] != "auto" || ra.events[3]["reason"] != airlock.EndDeleted {
		t.Errorf("reasons: %v", ra.events)
	}
	ra.mu.Unlock()

	status, _, body := s.raw("GET", "/v1/events?cursor=", s.a.key, "", nil)
	var page airlock.EventPage
	if status != http.StatusOK || json.Unmarshal([]byte(body), &page) != nil || len(page.Events) != 4 {
		t.Fatalf("feed: %d %s", status, body)
	}
	for i, ev := range page.Events {
		if ev.Type != want[i] || ev.SessionID != sess.ID || ev.ID == "" {
			t.Errorf("feed %d: %+v", i, ev)
		}
	}
	if page.NextCursor != page.Events[3].ID {
		t.Errorf("next_cursor %q", page.NextCursor)
	}
	status, _, body = s.raw("GET", "/v1/events?cursor="+page.NextCursor, s.a.key, "", nil)
	if status != http.StatusOK || !strings.Contains(body, `"events":[]`) {
		t.Errorf("feed after the last: %d %s", status, body)
	}
	// Tenant b sees none of it, in its feed or at its webhook.
	status, _, body = s.raw("GET", "/v1/events?cursor=", s.b.key, "", nil)
	if status != http.StatusOK || !strings.Contains(body, `"events":[]`) {
		t.Errorf("b's feed: %d %s", status, body)
	}
	if status, _, _ := s.raw("GET", "/v1/events?cursor="+page.Events[0].ID, s.b.key, "", nil); status != http.StatusBadRequest {
		t.Errorf("b with a's cursor: %d", status)
	}
	rb.mu.Lock()
	if len(rb.events) != 0 {
		t.Errorf("b's webhook got a's events: %v", rb.events)
	}
	rb.mu.Unlock()
	s.checkClean()
}

// A session with on_timeout pause but no auto_resume stays paused: a
// request is the session-paused problem until it is resumed.
func TestTimeoutPauseWithoutAutoResume(t *testing.T) {
	s := newStack(t, nil)
	ctx := ctxFor(t, 5*time.Minute)
	c := s.a.c
	sess := s.create(s.a, airlock.CreateSessionRequest{TimeoutS: 3,
		Lifecycle: &airlock.SessionLifecycle{OnTimeout: airlock.OnTimeoutPause}})
	if e := s.shell(s.a, sess.ID, "echo kept > /workspace/k.txt"); e.ExitCode != 0 {
		t.Fatal(e.Stderr)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		got, err := c.Session(ctx, sess.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.State == airlock.SessionPaused {
			break
		}
		if got.State.Final() || time.Now().After(deadline) {
			t.Fatalf("not paused at its timeout: %+v", got)
		}
		time.Sleep(100 * time.Millisecond) // polling a condition
	}
	_, err := c.Exec(ctx, sess.ID, airlock.SessionExecRequest{Shell: "true"})
	wantProblem(t, "exec on a paused session without auto_resume", err, http.StatusConflict, "session-paused")
	r, err := c.ResumeSession(ctx, sess.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !r.ExpiresAt.After(time.Now().Add(2 * time.Second)) {
		t.Errorf("resumed with no time left: expires %s", r.ExpiresAt)
	}
	if e := s.shell(s.a, sess.ID, "cat /workspace/k.txt"); e.Stdout != "kept\n" {
		t.Errorf("after resume: %q", e.Stdout)
	}
	if _, err := c.DeleteSession(ctx, sess.ID); err != nil {
		t.Fatal(err)
	}

	// Pausing needs a session without network.
	_, _, err = c.CreateSession(ctx, airlock.CreateSessionRequest{Image: "python-ds",
		Network:   &airlock.NetworkPolicy{Mode: airlock.NetworkAllowList, Allow: []string{"example.com"}},
		Lifecycle: &airlock.SessionLifecycle{OnTimeout: airlock.OnTimeoutPause}})
	wantProblem(t, "pause lifecycle with a network", err, http.StatusBadRequest, "invalid-lifecycle")
	_, _, err = c.CreateSession(ctx, airlock.CreateSessionRequest{Image: "python-ds",
		Lifecycle: &airlock.SessionLifecycle{OnTimeout: "hibernate"}})
	wantProblem(t, "unknown on_timeout", err, http.StatusBadRequest, "invalid-lifecycle")
	s.checkClean()
}

// TestAutoResumeBenchmark measures, for BENCHMARKS.md, the time from an
// exec sent to a paused session with auto_resume until its answer,
// beside the same exec on the live session: each round pauses the
// session (a Python context holding pandas), then times both. A
// measurement, not a check: run it with AIRLOCK_KEEP_BENCH=1.
func TestAutoResumeBenchmark(t *testing.T) {
	if os.Getenv("AIRLOCK_KEEP_BENCH") != "1" {
		t.Skip("a measurement: set AIRLOCK_KEEP_BENCH=1 to run it")
	}
	s := newStack(t, nil)
	ctx := ctxFor(t, 20*time.Minute)
	c := s.a.c
	sess := s.create(s.a, airlock.CreateSessionRequest{TimeoutS: 3600,
		Lifecycle: &airlock.SessionLifecycle{OnTimeout: airlock.OnTimeoutPause, AutoResume: true}})
	py, err := c.CreateContext(ctx, sess.ID, airlock.ContextPython)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.RunCell(ctx, sess.ID, py.ID, airlock.RunCellRequest{Code: "import pandas\nx = 1"}); err != nil {
		t.Fatal(err)
	}
	var resumed, manual, live []time.Duration
	req := airlock.SessionExecRequest{Shell: "cat /etc/hostname"}
	for range 5 {
		if _, err := c.PauseSession(ctx, sess.ID); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		if _, err := c.Exec(ctx, sess.ID, req); err != nil {
			t.Fatal(err)
		}
		resumed = append(resumed, time.Since(start))
		start = time.Now()
		if _, err := c.Exec(ctx, sess.ID, req); err != nil {
			t.Fatal(err)
		}
		live = append(live, time.Since(start))
		// The baseline: an explicit POST .../resume, then the exec.
		if _, err := c.PauseSession(ctx, sess.ID); err != nil {
			t.Fatal(err)
		}
		start = time.Now()
		if _, err := c.ResumeSession(ctx, sess.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Exec(ctx, sess.ID, req); err != nil {
			t.Fatal(err)
		}
		manual = append(manual, time.Since(start))
	}
	for _, m := range []struct {
		name string
		d    []time.Duration
	}{{"exec on the paused session (auto-resume)", resumed}, {"POST resume, then exec", manual}, {"exec on the live session", live}} {
		slices.Sort(m.d)
		t.Logf("%s: median %s, max %s, all %v", m.name, m.d[len(m.d)/2].Round(time.Millisecond), m.d[len(m.d)-1].Round(time.Millisecond), m.d)
	}
}

// A pause that takes the tenant's paused sessions over the node's
// paused storage quota ends the session, with the reason on record.
func TestPausedQuota(t *testing.T) {
	s := newStack(t, func(c *session.Config) { c.Keep.PausedQuotaBytes = 1 << 20 })
	ctx := ctxFor(t, 5*time.Minute)
	c := s.a.c
	sess := s.create(s.a, airlock.CreateSessionRequest{})
	p, err := c.PauseSession(ctx, sess.ID)
	if err != nil {
		t.Fatal(err)
	}
	if p.State != airlock.SessionDestroyed || p.EndReason != session.EndPausedQuota || !strings.Contains(p.EndDetail, "quota") {
		t.Fatalf("over the paused quota: %+v", p)
	}
	_, err = c.Exec(ctx, sess.ID, airlock.SessionExecRequest{Shell: "true"})
	wantProblem(t, "exec on a session ended by the paused quota", err, http.StatusConflict, "session-ended")
	s.checkClean()
}
