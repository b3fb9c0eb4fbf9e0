package session_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/api/rest"
	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/service/session"
)

// endpoint is one session route with a request that would succeed for the
// session's owner.
type endpoint struct {
	method, path, contentType, body string
}

func sessionEndpoints(id, cid string) []endpoint {
	return []endpoint{
		{"GET", "/v1/sessions/" + id, "", ""},
		{"POST", "/v1/sessions/" + id + "/timeout", "application/json", `{"timeout_s": 300}`},
		{"POST", "/v1/sessions/" + id + "/exec", "application/json", `{"shell": "echo hi"}`},
		{"POST", "/v1/sessions/" + id + "/exec/1/signal", "application/json", `{"signal": "TERM"}`},
		{"PUT", "/v1/sessions/" + id + "/files?path=x.txt", "application/octet-stream", "data"},
		{"GET", "/v1/sessions/" + id + "/files?path=x.txt", "", ""},
		{"GET", "/v1/sessions/" + id + "/files?list=1", "", ""},
		{"DELETE", "/v1/sessions/" + id + "/files?path=x.txt", "", ""},
		{"POST", "/v1/sessions/" + id + "/contexts", "application/json", `{"language": "python"}`},
		{"GET", "/v1/sessions/" + id + "/contexts", "", ""},
		{"POST", "/v1/sessions/" + id + "/contexts/" + cid + "/run", "application/json", `{"code": "1"}`},
		{"POST", "/v1/sessions/" + id + "/contexts/" + cid + "/restart", "", ""},
		{"DELETE", "/v1/sessions/" + id + "/contexts/" + cid, "", ""},
		{"DELETE", "/v1/sessions/" + id, "", ""},
	}
}

func problemOf(t *testing.T, what string, status int, ct, body string) rest.Problem {
	t.Helper()
	var p rest.Problem
	if ct != rest.ProblemContentType || json.Unmarshal([]byte(body), &p) != nil {
		t.Fatalf("%s: %d %s %.200s: not a problem document", what, status, ct, body)
	}
	if p.Status != status {
		t.Errorf("%s: problem status %d, HTTP %d", what, p.Status, status)
	}
	return p
}

// Two tenants' sessions are invisible to each other: every endpoint
// answers 404 for the other's session and context IDs, exactly as for IDs
// that do not exist, and nothing of the owner's session changes.
func TestTenantIsolation(t *testing.T) {
	s := newStack(t, nil)
	ctx := ctxFor(t, 3*time.Minute)
	sess := s.create(s.a, airlock.CreateSessionRequest{})
	cc, err := s.a.c.CreateContext(ctx, sess.ID, airlock.ContextPython)
	if err != nil {
		t.Fatal(err)
	}
	s.shell(s.a, sess.ID, "echo secret > x.txt")
	for _, ep := range sessionEndpoints(sess.ID, cc.ID) {
		status, ct, body := s.raw(ep.method, ep.path, s.b.key, ep.contentType, strings.NewReader(ep.body))
		what := "B: " + ep.method + " " + ep.path
		if status != 404 {
			t.Errorf("%s: %d %.200s, want 404", what, status, body)
			continue
		}
		p := problemOf(t, what, status, ct, body)
		if strings.Contains(body, "secret") {
			t.Errorf("%s leaked data: %s", what, body)
		}
		// The same answer as for a session that does not exist.
		st2, ct2, body2 := s.raw(ep.method, strings.ReplaceAll(ep.path, sess.ID, "00000000000000000000000000000000"), s.b.key, ep.contentType, strings.NewReader(ep.body))
		p2 := problemOf(t, what+" (missing)", st2, ct2, body2)
		if p.Type != p2.Type || st2 != status {
			t.Errorf("%s: %s, but %s for a missing session", what, p.Type, p2.Type)
		}
	}
	page, err := s.b.c.ListSessions(ctx, client.ListSessionsOptions{})
	if err != nil || len(page.Sessions) != 0 {
		t.Errorf("B lists %v, %v", page, err)
	}
	// A's session is untouched.
	got, err := s.a.c.Session(ctx, sess.ID)
	if err != nil || got.State != airlock.SessionReady || got.ExpiresAt != sess.ExpiresAt {
		t.Fatalf("A's session after B's attempts: %+v %v", got, err)
	}
	var out bytes.Buffer
	if _, err := s.a.c.GetFile(ctx, sess.ID, "x.txt", &out); err != nil || out.String() != "secret\n" {
		t.Fatalf("A's file after B's attempts: %q %v", out.String(), err)
	}
	if cs, err := s.a.c.ListContexts(ctx, sess.ID); err != nil || len(cs) != 1 {
		t.Fatalf("A's contexts after B's attempts: %v %v", cs, err)
	}
}

// Bad input on every endpoint gets a problem response, never a hang, a
// 500 or a plain-text error.
func TestBadInputProblems(t *testing.T) {
	s := newStack(t, func(c *session.Config) {
		c.Sizes = map[airlock.SessionSize]session.Size{airlock.SizeSmall: {CPUs: 1, MemoryBytes: 512 << 20, DiskBytes: 64 << 20, Pids: 128}}
	})
	sess := s.create(s.a, airlock.CreateSessionRequest{})
	gone := s.create(s.a, airlock.CreateSessionRequest{})
	if _, err := s.a.c.DeleteSession(ctxFor(t, time.Minute), gone.ID); err != nil {
		t.Fatal(err)
	}
	id, gid, key := sess.ID, gone.ID, s.a.key
	big := strings.Repeat("x", 100<<20)
	tests := []struct {
		name         string
		method, path string
		ct, body     string
		header       []string
		status       int
		slug         string
	}{
		// Creation.
		{"malformed JSON", "POST", "/v1/sessions", "application/json", `{"image":`, nil, 400, "invalid-json"},
		{"not JSON", "POST", "/v1/sessions", "text/plain", `hi`, nil, 415, "unsupported-media-type"},
		{"unknown size", "POST", "/v1/sessions", "application/json", `{"size": "huge"}`, nil, 400, "unknown-size"},
		{"unknown image", "POST", "/v1/sessions", "application/json", `{"image": "nope"}`, nil, 400, "unknown-image"},
		{"timeout too long", "POST", "/v1/sessions", "application/json", `{"timeout_s": 99999999}`, nil, 400, "timeout-out-of-range"},
		{"negative timeout", "POST", "/v1/sessions", "application/json", `{"timeout_s": -1}`, nil, 400, "timeout-out-of-range"},
		{"network", "POST", "/v1/sessions", "application/json", `{"network": {"mode": "allow_list", "allow": ["pypi.org:443"]}}`, nil, 403, "network-unavailable"},
		{"broker scopes", "POST", "/v1/sessions", "application/json", `{"broker_scopes": ["tickets.read"]}`, nil, 403, "broker-unavailable"},
		{"other tenant named", "POST", "/v1/sessions", "application/json", `{"tenant": "tenant-b"}`, nil, 403, "tenant-mismatch"},
		{"bad idempotency key", "POST", "/v1/sessions", "application/json", `{}`, []string{"Idempotency-Key", "has space"}, 400, "invalid-idempotency-key"},
		{"no key", "POST", "/v1/sessions", "application/json", `{}`, []string{"Authorization", ""}, 401, "unauthorized"},
		{"bad list limit", "GET", "/v1/sessions?limit=0", "", "", nil, 400, "invalid-limit"},
		{"bad list state", "GET", "/v1/sessions?state=gone", "", "", nil, 400, "invalid-state-filter"},
		{"bad cursor", "GET", "/v1/sessions?before=nope", "", "", nil, 400, "invalid-cursor"},
		// Unknown and ended sessions.
		{"unknown session", "GET", "/v1/sessions/nope", "", "", nil, 404, "session-not-found"},
		{"exec in unknown", "POST", "/v1/sessions/nope/exec", "application/json", `{"shell": "true"}`, nil, 404, "session-not-found"},
		{"exec in destroyed", "POST", "/v1/sessions/" + gid + "/exec", "application/json", `{"shell": "true"}`, nil, 409, "session-ended"},
		{"file in destroyed", "GET", "/v1/sessions/" + gid + "/files?path=x", "", "", nil, 409, "session-ended"},
		{"context in destroyed", "POST", "/v1/sessions/" + gid + "/contexts", "application/json", `{"language": "python"}`, nil, 409, "session-ended"},
		{"extend destroyed", "POST", "/v1/sessions/" + gid + "/timeout", "application/json", `{"timeout_s": 60}`, nil, 409, "session-ended"},
		// Extend.
		{"extend past the maximum", "POST", "/v1/sessions/" + id + "/timeout", "application/json", `{"timeout_s": 999999}`, nil, 400, "timeout-out-of-range"},
		{"extend without timeout", "POST", "/v1/sessions/" + id + "/timeout", "application/json", `{}`, nil, 400, "timeout-out-of-range"},
		// Exec.
		{"exec without command", "POST", "/v1/sessions/" + id + "/exec", "application/json", `{}`, nil, 400, "missing-command"},
		{"exec with both", "POST", "/v1/sessions/" + id + "/exec", "application/json", `{"cmd": ["true"], "shell": "true"}`, nil, 400, "invalid-command"},
		{"exec bad env", "POST", "/v1/sessions/" + id + "/exec", "application/json", `{"shell": "true", "env": {"A=B": "1"}}`, nil, 400, "invalid-env"},
		{"exec bad timeout", "POST", "/v1/sessions/" + id + "/exec", "application/json", `{"shell": "true", "timeout_sec": 999999}`, nil, 400, "timeout-out-of-range"},
		{"exec wrong type", "POST", "/v1/sessions/" + id + "/exec", "application/json", `{"cmd": "ls"}`, nil, 400, "invalid-json"},
		{"malformed stream request", "POST", "/v1/sessions/" + id + "/exec", "application/json", `{"shell": `, []string{"Accept", "text/event-stream"}, 400, "invalid-json"},
		{"stream request without command", "POST", "/v1/sessions/" + id + "/exec", "application/json", `{}`, []string{"Accept", "text/event-stream"}, 400, "missing-command"},
		{"exec body too large", "POST", "/v1/sessions/" + id + "/exec", "application/json", `{"shell": "` + strings.Repeat("x", 3<<20) + `"}`, nil, 413, "request-too-large"},
		{"signal unknown pid", "POST", "/v1/sessions/" + id + "/exec/4242/signal", "application/json", `{"signal": "TERM"}`, nil, 404, "process-not-found"},
		{"signal bad pid", "POST", "/v1/sessions/" + id + "/exec/abc/signal", "application/json", `{"signal": "TERM"}`, nil, 404, "process-not-found"},
		{"signal bad name", "POST", "/v1/sessions/" + id + "/exec/1/signal", "application/json", `{"signal": "SIGNOPE"}`, nil, 400, "invalid-signal"},
		{"signal out of range", "POST", "/v1/sessions/" + id + "/exec/1/signal", "application/json", `{"signal": 99}`, nil, 400, "invalid-signal"},
		// Files.
		{"no path", "GET", "/v1/sessions/" + id + "/files", "", "", nil, 400, "invalid-path"},
		{"dot-dot", "GET", "/v1/sessions/" + id + "/files?path=../etc/passwd", "", "", nil, 400, "invalid-path"},
		{"absolute outside", "GET", "/v1/sessions/" + id + "/files?path=/etc/passwd", "", "", nil, 400, "invalid-path"},
		{"put dot-dot", "PUT", "/v1/sessions/" + id + "/files?path=a/../../x", "application/octet-stream", "x", nil, 400, "invalid-path"},
		{"put absolute outside", "PUT", "/v1/sessions/" + id + "/files?path=/usr/bin/x", "application/octet-stream", "x", nil, 400, "invalid-path"},
		{"delete outside", "DELETE", "/v1/sessions/" + id + "/files?path=/", "", "", nil, 400, "invalid-path"},
		{"missing file", "GET", "/v1/sessions/" + id + "/files?path=nope.txt", "", "", nil, 404, "file-not-found"},
		{"directory as file", "GET", "/v1/sessions/" + id + "/files?path=/tmp", "", "", nil, 400, "is-a-directory"},
		{"bad list flag", "GET", "/v1/sessions/" + id + "/files?list=yes", "", "", nil, 400, "invalid-list"},
		{"oversize upload (announced)", "PUT", "/v1/sessions/" + id + "/files?path=big", "application/octet-stream", big, nil, 413, "file-too-large"},
		// Contexts.
		{"context language", "POST", "/v1/sessions/" + id + "/contexts", "application/json", `{"language": "cobol"}`, nil, 400, "unknown-language"},
		{"context without language", "POST", "/v1/sessions/" + id + "/contexts", "application/json", `{}`, nil, 400, "missing-language"},
		{"unknown context", "POST", "/v1/sessions/" + id + "/contexts/nope/run", "application/json", `{"code": "1"}`, nil, 404, "context-not-found"},
		{"restart unknown context", "POST", "/v1/sessions/" + id + "/contexts/nope/restart", "", "", nil, 404, "context-not-found"},
		{"delete unknown context", "DELETE", "/v1/sessions/" + id + "/contexts/nope", "", "", nil, 404, "context-not-found"},
		{"cell too large", "POST", "/v1/sessions/" + id + "/contexts/nope/run", "application/json", `{"code": "` + strings.Repeat("x", (1<<20)+1) + `"}`, nil, 413, "code-too-large"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k := key
			hdr := tt.header
			if len(hdr) == 2 && hdr[0] == "Authorization" {
				k, hdr = "", nil
			}
			status, ct, body := s.raw(tt.method, tt.path, k, tt.ct, strings.NewReader(tt.body), hdr...)
			if status != tt.status {
				t.Fatalf("status %d, want %d: %.300s", status, tt.status, body)
			}
			p := problemOf(t, tt.name, status, ct, body)
			if p.Type != rest.ProblemTypePrefix+tt.slug {
				t.Errorf("type %s, want %s (%s)", p.Type, tt.slug, p.Detail)
			}
		})
	}

	// Idempotency conflict: the same key with another body.
	c := s.a.c
	ctx := ctxFor(t, 2*time.Minute)
	first, created, err := c.CreateSession(ctx, airlock.CreateSessionRequest{Image: "base"}, client.WithIdempotencyKey("k-conflict"))
	if err != nil || !created {
		t.Fatalf("first: %v %v", created, err)
	}
	_, _, err = c.CreateSession(ctx, airlock.CreateSessionRequest{Image: "base", TimeoutS: 60}, client.WithIdempotencyKey("k-conflict"))
	wantProblem(t, "same key, other body", err, 422, "idempotency-key-reused")
	if _, err := c.DeleteSession(ctx, first.ID); err != nil {
		t.Fatal(err)
	}

	// The session is still well after all that.
	if e := s.shell(s.a, id, "echo ok"); e.Stdout != "ok\n" {
		t.Fatalf("session after bad input: %+v", e)
	}
	if out := fmt.Sprint(s.raw("GET", "/v1/sessions/"+id, key, "", nil)); !strings.Contains(out, `"state":"ready"`) {
		t.Fatalf("session state: %s", out)
	}
}
