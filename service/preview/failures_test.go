package preview_test

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/problem"
	"github.com/airlockhq/airlock/service/preview"
)

// wantProblem reads resp as an RFC 9457 problem of the given status and
// type, and checks that the type is in the catalogue.
func wantProblem(t *testing.T, resp *http.Response, status int, slug string) {
	t.Helper()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != status || !problem.IsJSON(resp.Header.Get("Content-Type")) {
		t.Fatalf("status %d (%s), want a %d problem %s: %s", resp.StatusCode, resp.Header.Get("Content-Type"), status, slug, b)
	}
	var p struct {
		Type   string `json:"type"`
		Status int    `json:"status"`
		Detail string `json:"detail"`
	}
	if err := json.Unmarshal(b, &p); err != nil || problem.Slug(p.Type) != slug || p.Status != status || p.Detail == "" {
		t.Fatalf("want problem %s (%d) with a detail: %s (%v)", slug, status, b, err)
	}
	if _, ok := problem.Lookup(slug); !ok {
		t.Fatalf("problem type %s is not catalogued", slug)
	}
}

// blockingApp is a server in a session that, on /hold, starts a request
// and waits until the test lets go; on /hangup closes the connection
// without answering; on /half sends its headers and part of a body,
// then closes.
func blockingApp(t *testing.T, release <-chan struct{}, arrived chan<- struct{}) string {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("/hold", func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	mux.HandleFunc("/hangup", func(w http.ResponseWriter, r *http.Request) {
		c, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			c.Close()
		}
	})
	mux.HandleFunc("/half", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "100000")
		w.WriteHeader(200)
		io.WriteString(w, strings.Repeat("x", 1000))
		http.NewResponseController(w).Flush()
		c, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			c.Close()
		}
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: mux}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

// TestNoBare502 goes through every way a preview can fail: each answers
// an RFC 9457 problem of a catalogued type, never a bare 502; a failure
// after the app's answer began cuts the body short (the client sees it
// incomplete) and is audited as failed.
func TestNoBare502(t *testing.T) {
	release, arrived := make(chan struct{}), make(chan struct{}, 4)
	defer close(release)
	e := newEnv(t, func(c *preview.Config) { c.MaxConns = 1 })
	fa := e.fake.s[e.a]
	e.fake.mu.Lock()
	fa.ports[9000] = blockingApp(t, release, arrived)
	fa.ports[9001] = "refused"
	e.fake.mu.Unlock()
	keyA := map[string]string{"Authorization": "Bearer key-ta"}

	t.Run("port not listening", func(t *testing.T) {
		for _, path := range []string{"/", "/deep/path?q=1"} {
			resp := e.do("GET", e.host(9001, e.a), path, keyA, nil)
			wantProblem(t, resp, 503, "preview-port-closed")
			if resp.Header.Get("Retry-After") == "" {
				t.Error("preview-port-closed without Retry-After")
			}
			wantProblem(t, e.do("GET", "", preview.PathPrefix(e.a, 9001)+path, keyA, nil), 503, "preview-port-closed")
		}
		// A port no app was ever given (the fake's dial refuses it too).
		wantProblem(t, e.do("GET", e.host(1234, e.a), "/", keyA, nil), 503, "preview-port-closed")
	})

	t.Run("app hangs up before answering", func(t *testing.T) {
		wantProblem(t, e.do("GET", e.host(9000, e.a), "/hangup", keyA, nil), 503, "preview-upstream-failed")
	})

	t.Run("app closes mid-response", func(t *testing.T) {
		resp := e.do("GET", e.host(9000, e.a), "/half", keyA, nil)
		if resp.StatusCode != 200 {
			t.Fatalf("status %d", resp.StatusCode)
		}
		n, err := io.Copy(io.Discard, resp.Body)
		if err == nil || n >= 100000 {
			t.Fatalf("a body cut off by the app read as complete: %d bytes, %v", n, err)
		}
		// The audit says so (written once the handler has returned).
		waitAudit(t, e, func(ev *airlock.EgressEvent) bool {
			return ev.Name == "/half" && ev.Verdict == airlock.VerdictFailed
		})
	})

	t.Run("connection limit", func(t *testing.T) {
		done := make(chan *http.Response, 1)
		go func() { done <- e.do("GET", e.host(9000, e.a), "/hold", keyA, nil) }()
		<-arrived
		resp := e.do("GET", e.host(8000, e.a), "/", keyA, nil)
		wantProblem(t, resp, 429, "preview-too-many-connections")
		if resp.Header.Get("Retry-After") == "" {
			t.Error("preview-too-many-connections without Retry-After")
		}
		release <- struct{}{}
		if r := <-done; r.StatusCode != 200 {
			t.Fatalf("held request: %d", r.StatusCode)
		}
	})

	t.Run("session ends under a request", func(t *testing.T) {
		// Waits until the held request has let go of its slot.
		e2 := newEnv(t, nil)
		fb := e2.fake.s[e2.a]
		e2.fake.mu.Lock()
		fb.ports[9000] = blockingApp(t, release, arrived)
		e2.fake.mu.Unlock()
		done := make(chan *http.Response, 1)
		go func() { done <- e2.do("GET", e2.host(9000, e2.a), "/hold", keyA, nil) }()
		<-arrived
		close(fb.ended)
		wantProblem(t, <-done, 409, "session-ended")
		// And once it has ended, a new request is the same problem.
		wantProblem(t, e2.do("GET", e2.host(8000, e2.a), "/", keyA, nil), 409, "session-ended")
		wantProblem(t, e2.do("GET", "", preview.PathPrefix(e2.a, 8000)+"/", keyA, nil), 409, "session-ended")
	})

	t.Run("session unknown", func(t *testing.T) {
		wantProblem(t, e.do("GET", e.host(8000, airlock.NewID()), "/", keyA, nil), 404, "session-not-found")
	})
}

// waitAudit waits for an audit entry that matches.
func waitAudit(t *testing.T, e *env, match func(*airlock.EgressEvent) bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		e.audit.mu.Lock()
		for _, ev := range e.audit.evs {
			if match(ev) {
				e.audit.mu.Unlock()
				return
			}
		}
		e.audit.mu.Unlock()
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("no such audit entry")
}

// TestPausedSession: a preview of a paused session resumes it when its
// lifecycle has auto_resume (for the key, a token and a public port),
// and is 409 session-paused otherwise, never a bare 502.
func TestPausedSession(t *testing.T) {
	e := newEnv(t, nil)
	keyA := map[string]string{"Authorization": "Bearer key-ta"}
	tok, err := e.svc.CreatePreviewToken(context.Background(), e.tenantA, e.a, 8000, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.SetPreviewPort(context.Background(), e.tenantA, e.a2, 8000, true); err != nil {
		t.Fatal(err)
	}
	pause := func(id string, auto bool) {
		e.fake.mu.Lock()
		e.fake.s[id].paused, e.fake.s[id].autoResume = true, auto
		e.fake.mu.Unlock()
	}
	resumes := func(id string) int {
		e.fake.mu.Lock()
		defer e.fake.mu.Unlock()
		return e.fake.s[id].resumes
	}
	tokHdr := map[string]string{preview.HeaderToken: tok.Token}
	for _, tc := range []struct {
		name string
		sid  string
		hdr  map[string]string
	}{
		{"key", e.a, keyA},
		{"token", e.a, tokHdr},
		{"public", e.a2, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pause(tc.sid, false)
			wantProblem(t, e.do("GET", e.host(8000, tc.sid), "/", tc.hdr, nil), 409, "session-paused")
			wantProblem(t, e.do("GET", "", preview.PathPrefix(tc.sid, 8000)+"/", tc.hdr, nil), 409, "session-paused")
			before := resumes(tc.sid)
			pause(tc.sid, true)
			answer(t, e.do("GET", e.host(8000, tc.sid), "/", tc.hdr, nil), 200)
			if resumes(tc.sid) != before+1 {
				t.Fatalf("resumes %d, want %d", resumes(tc.sid), before+1)
			}
		})
	}
	// Refusals come before any resume: another tenant's key, a revoked
	// key, no credential, a token of another session.
	pause(e.a, true)
	before := resumes(e.a)
	answer(t, e.do("GET", e.host(8000, e.a), "/", map[string]string{"Authorization": "Bearer key-tb"}, nil), 404)
	answer(t, e.do("GET", e.host(8000, e.a), "/", map[string]string{"Authorization": "Bearer revoked"}, nil), 401)
	answer(t, e.do("GET", e.host(8000, e.a), "/", nil, nil), 401)
	answer(t, e.do("GET", e.host(8000, e.b), "/", tokHdr, nil), 401)
	if resumes(e.a) != before {
		t.Fatal("a refused request resumed the session")
	}
}

// sandboxTokens admit "sbx-<session>" for that session's tenant ta.
type sandboxTokens struct{ sessions *fakeSessions }

func (sandboxTokens) TokenHeader() string { return "E2B-Traffic-Access-Token" }

func (s sandboxTokens) TokenTenant(ctx context.Context, sid, tok string) (*airlock.Tenant, error) {
	s.sessions.mu.Lock()
	defer s.sessions.mu.Unlock()
	if fs := s.sessions.s[sid]; fs != nil && tok == "sbx-"+sid {
		return &airlock.Tenant{ID: fs.tenant}, nil
	}
	return nil, airlock.ErrUnauthorized
}

// TestSandboxTokens: a sandbox-wide token of another front end (E2B's
// traffic token) opens every port of its session and nothing else, and
// never reaches the app.
func TestSandboxTokens(t *testing.T) {
	f := &fakeSessions{s: map[string]*fakeSession{}}
	e := newEnvWith(t, f, func(c *preview.Config) { c.SandboxTokens = sandboxTokens{sessions: f} })
	hdr := func(tok string) map[string]string { return map[string]string{"E2B-Traffic-Access-Token": tok} }
	for _, port := range []int{8000, 3000} {
		m := answer(t, e.do("GET", e.host(port, e.a), "/x", hdr("sbx-"+e.a), nil), 200)
		if m["path"] != "/x" {
			t.Fatalf("%v", m)
		}
	}
	resp := e.do("GET", e.host(8000, e.a), "/", hdr("sbx-"+e.a), nil)
	if m := answer(t, resp, 200); strings.Contains(mustJSON(m), "sbx-") {
		t.Fatalf("the sandbox token reached the app: %v", m)
	}
	wantProblem(t, e.do("GET", e.host(8000, e.b), "/", hdr("sbx-"+e.a), nil), 401, "preview-unauthorized")
	wantProblem(t, e.do("GET", e.host(8000, e.a), "/", hdr("sbx-"+e.b), nil), 401, "preview-unauthorized")
	wantProblem(t, e.do("GET", e.host(8000, e.a), "/", hdr("nonsense"), nil), 401, "preview-unauthorized")
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}
