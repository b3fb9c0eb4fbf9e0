package session_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
)

// TestAutoResumeOnPreviewAndAttach: a paused session whose lifecycle has
// auto_resume is resumed by a preview request (which is then served by
// the server that was running when it paused) and by a terminal attach
// (which then finds the terminal, which outlived the pause). Without
// auto_resume both are 409 session-paused and the session stays paused.
// Another tenant's key and a revoked key are refused and resume
// nothing.
func TestAutoResumeOnPreviewAndAttach(t *testing.T) {
	s := newStack(t, nil)
	ctx := ctxFor(t, 8*time.Minute)
	c := s.a.c
	auto := s.create(s.a, airlock.CreateSessionRequest{TimeoutS: 1800,
		Lifecycle: &airlock.SessionLifecycle{OnTimeout: airlock.OnTimeoutPause, AutoResume: true}})
	manual := s.create(s.a, airlock.CreateSessionRequest{TimeoutS: 1800,
		Lifecycle: &airlock.SessionLifecycle{OnTimeout: airlock.OnTimeoutPause}})
	// A revoked key of tenant a.
	revoked := s.newTenantKey(s.a)

	ptys := map[string]string{}
	for _, sess := range []*airlock.Session{auto, manual} {
		// The server leaves the exec's process group; the exec returns once
		// it listens.
		e := s.shell(s.a, sess.ID, `mkdir -p /workspace/site && echo kept-through-pause > /workspace/site/hello.txt && cd /workspace/site &&
setsid -f python3 -m http.server 8000 --bind 127.0.0.1 </dev/null >/dev/null 2>&1
until python3 -c 'import socket; socket.create_connection(("127.0.0.1", 8000))' 2>/dev/null; do sleep 0.1; done`)
		if e.ExitCode != 0 {
			t.Fatalf("start the server: %d %s", e.ExitCode, e.Stderr)
		}
		p, err := c.CreatePTY(ctx, sess.ID, airlock.CreatePTYRequest{Cols: 80, Rows: 24})
		if err != nil {
			t.Fatal(err)
		}
		ptys[sess.ID] = p.PTYID
		if _, err := c.PauseSession(ctx, sess.ID); err != nil {
			t.Fatal(err)
		}
	}
	s.revokeKey(revoked)

	preview := func(sess *airlock.Session, key string) (int, string, string) {
		return s.raw("GET", "/v1/sessions/"+sess.ID+"/ports/8000/hello.txt", key, "", nil)
	}
	attach := func(sess *airlock.Session, key string) (int, string, string) {
		return s.raw("GET", "/v1/sessions/"+sess.ID+"/pty/"+ptys[sess.ID], key, "", nil,
			"Connection", "Upgrade", "Upgrade", "websocket", "Sec-WebSocket-Version", "13",
			"Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
	}
	state := func(sess *airlock.Session) airlock.SessionState {
		got, err := c.Session(ctx, sess.ID)
		if err != nil {
			t.Fatal(err)
		}
		return got.State
	}
	wantStatus := func(what string, status int, ct, body string, want int, slug string) {
		t.Helper()
		if status != want || (slug != "" && (!strings.Contains(ct, "problem+json") || !strings.Contains(body, `/`+slug+`"`))) {
			t.Fatalf("%s: %d %s %.300s; want %d %s", what, status, ct, body, want, slug)
		}
	}

	// Refusals first: nothing is resumed by them.
	for _, sess := range []*airlock.Session{auto, manual} {
		st, ct, b := preview(sess, s.b.key)
		wantStatus("preview with another tenant's key", st, ct, b, http.StatusNotFound, "session-not-found")
		st, ct, b = attach(sess, s.b.key)
		wantStatus("attach with another tenant's key", st, ct, b, http.StatusNotFound, "session-not-found")
		st, ct, b = preview(sess, revoked.secret)
		wantStatus("preview with a revoked key", st, ct, b, http.StatusUnauthorized, "")
		st, ct, b = attach(sess, revoked.secret)
		wantStatus("attach with a revoked key", st, ct, b, http.StatusUnauthorized, "")
		if got := state(sess); got != airlock.SessionPaused {
			t.Fatalf("a refused request changed the session: %s", got)
		}
	}

	// Without auto_resume: 409 session-paused, and it stays paused.
	st, ct, b := preview(manual, s.a.key)
	wantStatus("preview of a paused session without auto_resume", st, ct, b, http.StatusConflict, "session-paused")
	st, ct, b = attach(manual, s.a.key)
	wantStatus("attach to a paused session without auto_resume", st, ct, b, http.StatusConflict, "session-paused")
	if got := state(manual); got != airlock.SessionPaused {
		t.Fatalf("without auto_resume: %s", got)
	}

	// With auto_resume: the preview request resumes it and is served.
	start := time.Now()
	st, ct, b = preview(auto, s.a.key)
	if st != http.StatusOK || b != "kept-through-pause\n" {
		t.Fatalf("preview of a paused session with auto_resume: %d %s %.300s", st, ct, b)
	}
	t.Logf("preview request to a paused session answered after %v (resume included)", time.Since(start).Round(time.Millisecond))
	if got := state(auto); got != airlock.SessionReady {
		t.Fatalf("after the preview: %s", got)
	}

	// Paused again: a terminal attach resumes it; the terminal outlived
	// the pause (see TestPTYSurvivesPause for what it holds).
	if _, err := c.PauseSession(ctx, auto.ID); err != nil {
		t.Fatal(err)
	}
	conn, err := c.AttachPTY(ctx, auto.ID, ptys[auto.ID])
	if err != nil {
		t.Fatalf("attach to a paused session with auto_resume: %v", err)
	}
	r := readTerm(conn)
	conn.Write([]byte("echo back-$((6*7))\n"))
	r.waitFor(t, "back-42\r\n")
	conn.Close()
	r.end(t)
	if got := state(auto); got != airlock.SessionReady {
		t.Fatalf("after the attach: %s", got)
	}
	// A terminal made now works, and the server still answers.
	if _, err := c.CreatePTY(ctx, auto.ID, airlock.CreatePTYRequest{Cols: 80, Rows: 24}); err != nil {
		t.Fatal(err)
	}
	if st, _, b := preview(auto, s.a.key); st != http.StatusOK || b != "kept-through-pause\n" {
		t.Fatalf("preview after the attach: %d %.300s", st, b)
	}
	for _, sess := range []*airlock.Session{auto, manual} {
		if _, err := c.DeleteSession(ctx, sess.ID); err != nil {
			t.Fatal(err)
		}
	}
}

// extraKey is a second key of a tenant.
type extraKey struct {
	id, secret string
}

// newTenantKey makes another key of tc's tenant.
func (s *stack) newTenantKey(tc tenantClient) extraKey {
	s.t.Helper()
	secret, key := airlock.NewAPIKey(tc.tenant.ID, "", time.Now())
	if err := s.store.CreateAPIKey(ctxFor(s.t, time.Minute), key); err != nil {
		s.t.Fatal(err)
	}
	return extraKey{id: key.ID, secret: secret}
}

// revokeKey revokes k.
func (s *stack) revokeKey(k extraKey) {
	s.t.Helper()
	if _, err := s.store.RevokeAPIKey(ctxFor(s.t, time.Minute), k.id); err != nil {
		s.t.Fatal(err)
	}
}
