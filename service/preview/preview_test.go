package preview_test

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/agent/protocol"
	"github.com/airlockhq/airlock/service/preview"
)

const domain = "preview.test"

// fakeSessions are sessions whose "loopback" ports are listeners of
// the test, one set per session.
type fakeSessions struct {
	mu    sync.Mutex
	s     map[string]*fakeSession
	dials int
}

type fakeSession struct {
	tenant string
	ports  map[int]string // port -> address
	ended  chan struct{}
	// paused: PreviewTarget answers session-paused, or with autoResume
	// (and a tenant) resumes it and counts the resume.
	paused, autoResume bool
	resumes            int
}

func (f *fakeSessions) PreviewTarget(ctx context.Context, tenant *airlock.Tenant, id string) (*airlock.PreviewTarget, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.s[id]
	if s == nil || tenant != nil && tenant.ID != s.tenant {
		return nil, airlock.Problem(airlock.ENOTFOUND, "session-not-found", "no session %s", id)
	}
	select {
	case <-s.ended:
		return nil, airlock.Problem(airlock.ECONFLICT, "session-ended", "session %s has ended", id)
	default:
	}
	if s.paused {
		// As the session manager: only a request for the owner resumes.
		if tenant == nil || !s.autoResume {
			return nil, airlock.Problem(airlock.ECONFLICT, "session-paused", "session %s is paused", id)
		}
		s.paused = false
		s.resumes++
	}
	return &airlock.PreviewTarget{TenantID: s.tenant, SessionID: id, Ended: s.ended,
		Dial: func(ctx context.Context, port int) (net.Conn, error) {
			f.mu.Lock()
			addr, ok := s.ports[port]
			f.dials++
			f.mu.Unlock()
			if !ok || addr == "refused" {
				// What the agent answers for a port nothing listens on.
				return nil, &protocol.RemoteError{ErrorMessage: protocol.ErrorMessage{Code: "refused", Message: "connection refused"}}
			}
			var d net.Dialer
			return d.DialContext(ctx, "tcp", addr)
		}}, nil
}

// fakeKeys resolve "key-<tenant>" to that tenant, "revoked" to a
// revoked key.
type fakeKeys struct{}

func (fakeKeys) APIKeyByHash(ctx context.Context, hash string) (*airlock.APIKey, error) {
	for _, t := range []string{"ta", "tb"} {
		if hash == airlock.HashAPIKey("key-"+t) {
			return &airlock.APIKey{ID: "k" + t, TenantID: t, Role: airlock.RoleTenant}, nil
		}
	}
	if hash == airlock.HashAPIKey("revoked") {
		now := time.Now().Add(-time.Hour)
		return &airlock.APIKey{ID: "kr", TenantID: "ta", Role: airlock.RoleTenant, RevokedAt: &now}, nil
	}
	return nil, airlock.ErrNotFound
}

func (fakeKeys) TenantByID(ctx context.Context, id string) (*airlock.Tenant, error) {
	return &airlock.Tenant{ID: id, Name: id}, nil
}

// memAudit keeps audit entries.
type memAudit struct {
	mu  sync.Mutex
	evs []*airlock.EgressEvent
}

func (m *memAudit) RecordEgress(ctx context.Context, evs []*airlock.EgressEvent) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.evs = append(m.evs, evs...)
	return nil
}

func (m *memAudit) ListEgress(ctx context.Context, f airlock.EgressFilter) ([]*airlock.EgressEvent, error) {
	return nil, nil
}

// app is the server "inside" a session: it answers what it was asked
// and with which headers, streams, and echoes an upgraded connection.
func app(t *testing.T, name string) string {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{
			"app": name, "method": r.Method, "path": r.URL.Path, "query": r.URL.RawQuery, "host": r.Host,
			"authorization": r.Header.Get("Authorization"), "token": r.Header.Get(preview.HeaderToken),
			"api_key": r.Header.Get("X-Api-Key"), "cookie": r.Header.Get("Cookie"), "body": string(body),
			"prefix": r.Header.Get("X-Forwarded-Prefix"),
		})
	})
	mux.HandleFunc("/events", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for i := 0; ; i++ {
			if _, err := fmt.Fprintf(w, "data: %d\n\n", i); err != nil {
				return
			}
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	})
	mux.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.URL.Query().Get("n"))
		io.CopyN(w, zeros{}, int64(n))
	})
	mux.HandleFunc("/sum", func(w http.ResponseWriter, r *http.Request) {
		h := sha256.New()
		n, _ := io.Copy(h, r.Body)
		fmt.Fprintf(w, "%d %x", n, h.Sum(nil))
	})
	mux.HandleFunc("/echo", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Upgrade") != "echo" {
			http.Error(w, "upgrade required", 426)
			return
		}
		c, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer c.Close()
		brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\n")
		brw.Flush()
		io.Copy(c, brw)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().String()
}

type zeros struct{}

func (zeros) Read(b []byte) (int, error) { clear(b); return len(b), nil }

type env struct {
	t       *testing.T
	svc     *preview.Service
	srv     *httptest.Server
	fake    *fakeSessions
	audit   *memAudit
	a, b    string // session IDs of tenants ta and tb
	a2      string // a second session of ta
	tenantA *airlock.Tenant
}

func newEnv(t *testing.T, mod func(*preview.Config)) *env {
	t.Helper()
	return newEnvWith(t, &fakeSessions{s: map[string]*fakeSession{}}, mod)
}

// newEnvWith is newEnv over the given (empty) fake sessions.
func newEnvWith(t *testing.T, fake *fakeSessions, mod func(*preview.Config)) *env {
	t.Helper()
	e := &env{t: t, fake: fake, audit: &memAudit{},
		a: airlock.NewID(), b: airlock.NewID(), a2: airlock.NewID(), tenantA: &airlock.Tenant{ID: "ta"}}
	e.fake.s[e.a] = &fakeSession{tenant: "ta", ports: map[int]string{8000: app(t, "a"), 3000: app(t, "a3000")}, ended: make(chan struct{})}
	e.fake.s[e.b] = &fakeSession{tenant: "tb", ports: map[int]string{8000: app(t, "b")}, ended: make(chan struct{})}
	e.fake.s[e.a2] = &fakeSession{tenant: "ta", ports: map[int]string{8000: app(t, "a2")}, ended: make(chan struct{})}
	key := make([]byte, 32)
	rand.Read(key)
	cfg := preview.Config{Targets: e.fake, Keys: fakeKeys{}, SigningKey: key, Domain: domain, Audit: e.audit}
	if mod != nil {
		mod(&cfg)
	}
	svc, err := preview.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.svc = svc
	// The path form, as the REST API routes it (its key check reduced
	// to the fake keys).
	mux := http.NewServeMux()
	mux.HandleFunc("/v1/sessions/{id}/ports/{port}/{path...}", func(w http.ResponseWriter, r *http.Request) {
		var tenant *airlock.Tenant
		if k, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
			p, err := airlock.Authenticate(r.Context(), fakeKeys{}, k, time.Now())
			if err != nil {
				http.Error(w, "bad key", 401)
				return
			}
			tenant = p.Tenant
		}
		port, _ := strconv.Atoi(r.PathValue("port"))
		svc.ServePreview(w, r, tenant, r.PathValue("id"), port, "/"+r.PathValue("path"))
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "the API")
	})
	e.srv = httptest.NewServer(svc.Wrap(mux))
	t.Cleanup(func() { e.srv.Close(); svc.Close() })
	return e
}

// do sends a request to the test server with the given Host.
func (e *env) do(method, host, path string, hdr map[string]string, body io.Reader) *http.Response {
	e.t.Helper()
	req, err := http.NewRequest(method, e.srv.URL+path, body)
	if err != nil {
		e.t.Fatal(err)
	}
	if host != "" {
		req.Host = host
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func (e *env) host(port int, sid string) string { return preview.HostFor(port, sid, domain) }

func answer(t *testing.T, resp *http.Response, want int) map[string]any {
	t.Helper()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		t.Fatalf("status %d, want %d: %s", resp.StatusCode, want, b)
	}
	var m map[string]any
	if want == 200 {
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("not the app's JSON: %s", b)
		}
	} else if resp.StatusCode >= 400 && !strings.Contains(resp.Header.Get("Content-Type"), "problem+json") {
		t.Fatalf("a %d that is not a problem: %s %s", resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	return m
}

func TestKeyOpensOwnSessionOnly(t *testing.T) {
	e := newEnv(t, nil)
	keyA := map[string]string{"Authorization": "Bearer key-ta", "X-Api-Key": "key-ta", "Cookie": "app=1"}
	m := answer(t, e.do("GET", e.host(8000, e.a), "/x/y?q=1", keyA, nil), 200)
	if m["app"] != "a" || m["path"] != "/x/y" || m["query"] != "q=1" || m["host"] != e.host(8000, e.a) {
		t.Fatalf("host form reached %v", m)
	}
	if m["authorization"] != "" || m["api_key"] != "" || m["cookie"] != "app=1" {
		t.Fatalf("credentials reached the app: %v", m)
	}
	m = answer(t, e.do("POST", "", "/v1/sessions/"+e.a+"/ports/3000/p?z=2", keyA, strings.NewReader("hello")), 200)
	if m["app"] != "a3000" || m["path"] != "/p" || m["body"] != "hello" || m["prefix"] != "/v1/sessions/"+e.a+"/ports/3000" {
		t.Fatalf("path form reached %v", m)
	}
	// Tenant A's key on tenant B's session: not found, as everywhere.
	answer(t, e.do("GET", e.host(8000, e.b), "/", keyA, nil), 404)
	answer(t, e.do("GET", "", "/v1/sessions/"+e.b+"/ports/8000/", keyA, nil), 404)
	// A revoked key and a wrong key: 401.
	answer(t, e.do("GET", e.host(8000, e.a), "/", map[string]string{"Authorization": "Bearer revoked"}, nil), 401)
	answer(t, e.do("GET", e.host(8000, e.a), "/", map[string]string{"Authorization": "Bearer nope"}, nil), 401)
	// No credentials: 401, on both forms.
	answer(t, e.do("GET", e.host(8000, e.a), "/", nil, nil), 401)
	answer(t, e.do("GET", "", "/v1/sessions/"+e.a+"/ports/8000/", nil, nil), 401)
	// A port nothing listens on: a problem, not a hang or a crash.
	answer(t, e.do("GET", e.host(9999, e.a), "/", keyA, nil), 503)
}

func TestTokens(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	tok, err := e.svc.CreatePreviewToken(ctx, e.tenantA, e.a, 8000, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	hdr := map[string]string{preview.HeaderToken: tok.Token}
	m := answer(t, e.do("GET", e.host(8000, e.a), "/", hdr, nil), 200)
	if m["token"] != "" {
		t.Fatalf("the token reached the app: %v", m)
	}
	answer(t, e.do("GET", "", "/v1/sessions/"+e.a+"/ports/8000/", hdr, nil), 200)
	// The token opens that session's port only.
	answer(t, e.do("GET", e.host(3000, e.a), "/", hdr, nil), 401)
	answer(t, e.do("GET", e.host(8000, e.a2), "/", hdr, nil), 401)
	answer(t, e.do("GET", e.host(8000, e.b), "/", hdr, nil), 401)
	answer(t, e.do("GET", "", "/v1/sessions/"+e.b+"/ports/8000/", hdr, nil), 401)
	// Tampered: 401.
	bad := tok.Token[:len(tok.Token)-2] + "AA"
	answer(t, e.do("GET", e.host(8000, e.a), "/", map[string]string{preview.HeaderToken: bad}, nil), 401)

	// The query form is exchanged for a cookie of that host and a
	// redirect to the URL without the token.
	resp := e.do("GET", e.host(8000, e.a), "/page?x=1&"+preview.QueryToken+"="+url.QueryEscape(tok.Token), nil, nil)
	if resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != "/page?x=1" {
		t.Fatalf("query token: %d to %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	var cookie *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == preview.CookieToken {
			cookie = c
		}
	}
	if cookie == nil || cookie.Domain != "" || !cookie.HttpOnly || cookie.Path != "/" {
		t.Fatalf("cookie %+v: want a host-only, HttpOnly cookie", cookie)
	}
	withCookie := map[string]string{"Cookie": preview.CookieToken + "=" + cookie.Value + "; theirs=1"}
	m = answer(t, e.do("GET", e.host(8000, e.a), "/page?x=1", withCookie, nil), 200)
	if m["cookie"] != "theirs=1" {
		t.Fatalf("the app got cookies %q", m["cookie"])
	}
	// The path form's cookie is scoped to the port's path.
	resp = e.do("GET", "", "/v1/sessions/"+e.a+"/ports/8000/?"+preview.QueryToken+"="+url.QueryEscape(tok.Token), nil, nil)
	if resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != "/v1/sessions/"+e.a+"/ports/8000/" ||
		!strings.Contains(resp.Header.Get("Set-Cookie"), "Path=/v1/sessions/"+e.a+"/ports/8000/") {
		t.Fatalf("path form query token: %d %q %q", resp.StatusCode, resp.Header.Get("Location"), resp.Header.Get("Set-Cookie"))
	}
	// Another session's query token is refused, with no cookie.
	resp = e.do("GET", e.host(8000, e.b), "/?"+preview.QueryToken+"="+url.QueryEscape(tok.Token), nil, nil)
	if resp.StatusCode != 401 || resp.Header.Get("Set-Cookie") != "" {
		t.Fatalf("another session's query token: %d %q", resp.StatusCode, resp.Header.Get("Set-Cookie"))
	}

	// Listed, then revoked: refused in every form.
	p, err := e.svc.PreviewPort(ctx, e.tenantA, e.a, 8000)
	if err != nil || len(p.Tokens) != 1 || p.Tokens[0].TokenID != tok.TokenID {
		t.Fatalf("port %+v %v", p, err)
	}
	if _, err := e.svc.PreviewPort(ctx, &airlock.Tenant{ID: "tb"}, e.a, 8000); airlock.ErrorCode(err) != airlock.ENOTFOUND {
		t.Fatalf("tenant B described A's port: %v", err)
	}
	if _, err := e.svc.RevokePreviewTokens(ctx, &airlock.Tenant{ID: "tb"}, e.a, 8000, ""); airlock.ErrorCode(err) != airlock.ENOTFOUND {
		t.Fatalf("tenant B revoked A's tokens: %v", err)
	}
	if _, err := e.svc.RevokePreviewTokens(ctx, e.tenantA, e.a, 8000, tok.TokenID); err != nil {
		t.Fatal(err)
	}
	answer(t, e.do("GET", e.host(8000, e.a), "/", hdr, nil), 401)
	answer(t, e.do("GET", e.host(8000, e.a), "/", withCookie, nil), 401)
	// Revoke all.
	t1, _ := e.svc.CreatePreviewToken(ctx, e.tenantA, e.a, 8000, time.Minute)
	t2, _ := e.svc.CreatePreviewToken(ctx, e.tenantA, e.a, 8000, time.Minute)
	answer(t, e.do("GET", e.host(8000, e.a), "/", map[string]string{preview.HeaderToken: t1.Token}, nil), 200)
	if _, err := e.svc.RevokePreviewTokens(ctx, e.tenantA, e.a, 8000, ""); err != nil {
		t.Fatal(err)
	}
	for _, tk := range []*airlock.PreviewToken{t1, t2} {
		answer(t, e.do("GET", e.host(8000, e.a), "/", map[string]string{preview.HeaderToken: tk.Token}, nil), 401)
	}
	// Bad TTLs and ports.
	for _, ttl := range []time.Duration{-time.Second, time.Millisecond, 30 * 24 * time.Hour} {
		if _, err := e.svc.CreatePreviewToken(ctx, e.tenantA, e.a, 8000, ttl); airlock.ErrorCode(err) != airlock.EINVALID {
			t.Fatalf("ttl %v: %v", ttl, err)
		}
	}
	for _, port := range []int{0, -1, 65536} {
		if _, err := e.svc.CreatePreviewToken(ctx, e.tenantA, e.a, port, time.Minute); airlock.ErrorCode(err) != airlock.EINVALID {
			t.Fatalf("port %d: %v", port, err)
		}
	}
}

func TestTokenExpires(t *testing.T) {
	now := time.Now()
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	e := newEnv(t, func(c *preview.Config) { c.Now = clock })
	tok, err := e.svc.CreatePreviewToken(context.Background(), e.tenantA, e.a, 8000, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	hdr := map[string]string{preview.HeaderToken: tok.Token}
	answer(t, e.do("GET", e.host(8000, e.a), "/", hdr, nil), 200)
	mu.Lock()
	now = now.Add(11 * time.Second)
	mu.Unlock()
	answer(t, e.do("GET", e.host(8000, e.a), "/", hdr, nil), 401)
}

func TestPublicPort(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	answer(t, e.do("GET", e.host(8000, e.a), "/", nil, nil), 401)
	if _, err := e.svc.SetPreviewPort(ctx, &airlock.Tenant{ID: "tb"}, e.a, 8000, true); airlock.ErrorCode(err) != airlock.ENOTFOUND {
		t.Fatalf("tenant B made A's port public: %v", err)
	}
	p, err := e.svc.SetPreviewPort(ctx, e.tenantA, e.a, 8000, true)
	if err != nil || !p.Public {
		t.Fatalf("%+v %v", p, err)
	}
	answer(t, e.do("GET", e.host(8000, e.a), "/", nil, nil), 200)
	answer(t, e.do("GET", "", "/v1/sessions/"+e.a+"/ports/8000/", nil, nil), 200)
	// That port only.
	answer(t, e.do("GET", e.host(3000, e.a), "/", nil, nil), 401)
	answer(t, e.do("GET", e.host(8000, e.a2), "/", nil, nil), 401)
	if _, err := e.svc.SetPreviewPort(ctx, e.tenantA, e.a, 8000, false); err != nil {
		t.Fatal(err)
	}
	answer(t, e.do("GET", e.host(8000, e.a), "/", nil, nil), 401)
}

// Hosts and paths crafted to reach something other than a port of a
// session on its loopback: the API, the metadata address, another
// session, the node's loopback. Every one is refused or stays inside
// the session it names.
func TestProbes(t *testing.T) {
	e := newEnv(t, nil)
	if _, err := e.svc.SetPreviewPort(context.Background(), e.tenantA, e.a, 8000, true); err != nil {
		t.Fatal(err)
	}
	okHost := e.host(8000, e.a)
	for _, host := range []string{
		domain, // the bare domain may be the API's own name
		"example.com",
	} {
		resp := e.do("GET", host, "/", nil, nil)
		b, _ := io.ReadAll(resp.Body)
		if string(b) != "the API" {
			t.Errorf("host %q: %d %s", host, resp.StatusCode, b)
		}
	}
	for _, host := range []string{
		"0-" + e.a + "." + domain,
		"65536-" + e.a + "." + domain,
		"08000-" + e.a + "." + domain,
		"+8000-" + e.a + "." + domain,
		"8000-" + strings.ToUpper(e.a[:4]) + "x" + e.a[5:] + "." + domain,
		"8000-" + e.a + "x." + domain,
		"8000-" + e.a[:31] + "." + domain,
		"8000-" + e.a + "-1." + domain,
		"8000-" + e.a + ".x." + domain,
		"x.8000-" + e.a + "." + domain,
		"8000_" + e.a + "." + domain,
		"8000-" + e.a + "." + domain + ":x",
		"8000-" + e.a + "." + domain + ":",
		"169.254.169.254-" + e.a + "." + domain,
		"127.0.0.1:8080-" + e.a + "." + domain,
		"8000-" + e.a + "%2e" + domain,
		"8000-" + e.a + "." + domain + "%00",
		"www." + domain,
		"api." + domain,
		"8000-" + e.a + "." + domain + ".evil.example",
	} {
		resp := e.do("GET", host, "/", nil, nil)
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode == 400 && !strings.Contains(string(b), "app") {
			continue // refused by net/http itself
		}
		if resp.StatusCode != 404 || !strings.Contains(string(b), "preview-host-invalid") {
			t.Errorf("host %q reached %d %s", host, resp.StatusCode, b)
		}
	}
	// Paths stay paths of the app on that port, whatever they spell.
	for _, path := range []string{
		"/../../v1/sessions",
		"//169.254.169.254/latest/meta-data/",
		"/%2e%2e/%2e%2e/v1/keys",
		"/http://127.0.0.1:8080/v1/keys",
		"/@169.254.169.254/",
		"/..%2f..%2fv1",
	} {
		resp := e.do("GET", okHost, path, nil, nil)
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode == 200 {
			var m map[string]any
			if json.Unmarshal(b, &m) != nil || m["app"] != "a" {
				t.Errorf("path %q reached %s", path, b)
			}
		} else if string(b) == "the API" {
			t.Errorf("path %q reached the API", path)
		}
	}
	// An absolute URI naming another host in the request line.
	c, err := net.Dial("tcp", e.srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "GET http://169.254.169.254/latest/meta-data/ HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", okHost)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	// net/http takes the URI's host for the request's: it is not a
	// preview host, so this is an API request (which proxies nothing).
	if strings.Contains(string(b), `"app"`) {
		t.Errorf("absolute URI reached %d %s", resp.StatusCode, b)
	}
	// The path form: bad ports and session IDs.
	keyA := map[string]string{"Authorization": "Bearer key-ta"}
	for _, p := range []string{"/v1/sessions/" + e.a + "/ports/0/", "/v1/sessions/" + e.a + "/ports/70000/", "/v1/sessions/../ports/8000/"} {
		resp := e.do("GET", "", p, keyA, nil)
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode == 200 && strings.Contains(string(b), `"app"`) {
			t.Errorf("%s reached %s", p, b)
		}
	}
}

func TestStreams(t *testing.T) {
	e := newEnv(t, nil)
	keyA := map[string]string{"Authorization": "Bearer key-ta"}
	host := e.host(8000, e.a)
	// SSE: events arrive one by one, not at the end.
	resp := e.do("GET", host, "/events", keyA, nil)
	br := bufio.NewReader(resp.Body)
	for i := 0; i < 3; i++ {
		line, err := br.ReadString('\n')
		if err != nil || line != fmt.Sprintf("data: %d\n", i) {
			t.Fatalf("event %d: %q %v", i, line, err)
		}
		br.ReadString('\n')
	}
	resp.Body.Close()
	// A large download and upload, whole.
	const n = 64 << 20
	resp = e.do("GET", host, "/big?n="+strconv.Itoa(n), keyA, nil)
	got, err := io.Copy(io.Discard, resp.Body)
	if err != nil || got != n {
		t.Fatalf("download %d of %d: %v", got, n, err)
	}
	data := make([]byte, 8<<20)
	rand.Read(data)
	resp = e.do("POST", host, "/sum", keyA, strings.NewReader(string(data)))
	b, _ := io.ReadAll(resp.Body)
	if want := fmt.Sprintf("%d %x", len(data), sha256.Sum256(data)); string(b) != want {
		t.Fatalf("upload: %q, want %q", b, want)
	}
	// An upgraded connection: bytes both ways.
	c, err := net.Dial("tcp", e.srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "GET /echo HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer key-ta\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n", host)
	cr := bufio.NewReader(c)
	up, err := http.ReadResponse(cr, nil)
	if err != nil || up.StatusCode != 101 {
		t.Fatalf("upgrade: %v %v", up, err)
	}
	for i := 0; i < 3; i++ {
		msg := fmt.Sprintf("hello %d\n", i)
		io.WriteString(c, msg)
		line, err := cr.ReadString('\n')
		if err != nil || line != msg {
			t.Fatalf("echo: %q %v", line, err)
		}
	}
	c.Close()
	// One audit entry per request, with bytes and status (written
	// after the request, off its path).
	deadline := time.Now().Add(10 * time.Second)
	for {
		e.audit.mu.Lock()
		n := len(e.audit.evs)
		e.audit.mu.Unlock()
		if n >= 4 || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond) // polling a condition, bounded by the deadline
	}
	e.audit.mu.Lock()
	defer e.audit.mu.Unlock()
	var sawBig, sawUpgrade bool
	for _, ev := range e.audit.evs {
		if ev.Kind != airlock.EgressPreview || ev.SessionID != e.a || ev.TenantID != "ta" || ev.Port != 8000 || ev.Reason != "key" {
			t.Errorf("audit entry %+v", ev)
		}
		if ev.Name == "/big" && ev.BytesDown >= n && ev.Detail == "status 200" {
			sawBig = true
		}
		if ev.Name == "/echo" && ev.Protocol == "GET upgrade" && ev.BytesDown > 0 && ev.BytesUp > 0 {
			sawUpgrade = true
		}
	}
	if len(e.audit.evs) != 4 || !sawBig || !sawUpgrade {
		for _, ev := range e.audit.evs {
			t.Logf("%+v", ev)
		}
		t.Fatalf("%d audit entries (big %v, upgrade %v), want 4", len(e.audit.evs), sawBig, sawUpgrade)
	}
}

func TestLimits(t *testing.T) {
	e := newEnv(t, func(c *preview.Config) { c.MaxConns = 1; c.MaxBytes = 1 << 20 })
	keyA := map[string]string{"Authorization": "Bearer key-ta"}
	host := e.host(8000, e.a)
	// One stream open: a second request is 429.
	resp := e.do("GET", host, "/events", keyA, nil)
	if line, err := bufio.NewReader(resp.Body).ReadString('\n'); err != nil || resp.StatusCode != 200 {
		t.Fatalf("stream: %d %q %v", resp.StatusCode, line, err)
	}
	answer(t, e.do("GET", host, "/", keyA, nil), 429)
	// Another session is not held back by it.
	answer(t, e.do("GET", e.host(8000, e.a2), "/", keyA, nil), 200)
	resp.Body.Close()
	// The bytes: a download past the limit is cut, and the next request
	// refused. (The stream above lets go of its slot when its proxy
	// sees the client gone: until then, 429 too-many-connections.)
	deadline := time.Now().Add(10 * time.Second)
	for {
		r := e.do("GET", host, "/big?n="+strconv.Itoa(4<<20), keyA, nil)
		if r.StatusCode == 429 {
			b, _ := io.ReadAll(r.Body)
			if !strings.Contains(string(b), "preview-too-many-connections") || time.Now().After(deadline) {
				t.Fatalf("%s", b)
			}
			continue
		}
		n, _ := io.Copy(io.Discard, r.Body)
		if n >= 4<<20 {
			t.Fatalf("a %d-byte download passed a 1 MiB limit", n)
		}
		break
	}
	r := e.do("GET", host, "/", keyA, nil)
	b, _ := io.ReadAll(r.Body)
	if r.StatusCode != 429 || !strings.Contains(string(b), "preview-bytes-exhausted") {
		t.Fatalf("after the limit: %d %s", r.StatusCode, b)
	}
}

func TestSessionEndCutsPreview(t *testing.T) {
	e := newEnv(t, nil)
	resp := e.do("GET", e.host(8000, e.a), "/events", map[string]string{"Authorization": "Bearer key-ta"}, nil)
	br := bufio.NewReader(resp.Body)
	br.ReadString('\n')
	close(e.fake.s[e.a].ended)
	done := make(chan error, 1)
	go func() { _, err := io.Copy(io.Discard, br); done <- err }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the stream went on after its session ended")
	}
}

func TestParseHost(t *testing.T) {
	sid := airlock.NewID()
	for _, tc := range []struct {
		host  string
		port  int
		under bool
	}{
		{"8080-" + sid + "." + domain, 8080, true},
		{"8080-" + sid + "." + domain + ":443", 8080, true},
		{"8080-" + sid + "." + domain + ".", 8080, true},
		{"1-" + sid + ".PREVIEW.test", 1, true},
		{"65535-" + sid + "." + domain, 65535, true},
		{"65536-" + sid + "." + domain, 0, true},
		{"0-" + sid + "." + domain, 0, true},
		{domain, 0, false},
		{"example.com", 0, false},
		{"8080-" + sid + ".other.test", 0, false},
	} {
		port, got, under, err := preview.ParseHost(tc.host, domain)
		if under != tc.under || port != tc.port || (tc.port != 0) != (err == nil) || (err == nil && got != sid) {
			t.Errorf("%q: port %d sid %q under %v err %v", tc.host, port, got, under, err)
		}
	}
}

func FuzzParseHost(f *testing.F) {
	sid := airlock.NewID()
	f.Add("8080-" + sid + "." + domain)
	f.Add("8080-" + sid + "." + domain + ":80")
	f.Add("x")
	f.Fuzz(func(t *testing.T, host string) {
		port, got, _, err := preview.ParseHost(host, domain)
		if err != nil {
			return
		}
		if port < 1 || port > 65535 || !preview.ValidSessionID(got) {
			t.Fatalf("%q parsed to %d %q", host, port, got)
		}
		// What parses is exactly the canonical name (case, a trailing
		// dot and a listen port aside).
		h := strings.ToLower(host)
		if i := strings.LastIndexByte(h, ':'); i >= 0 {
			h = h[:i]
		}
		if strings.TrimSuffix(h, ".") != preview.HostFor(port, got, domain) {
			t.Fatalf("%q parsed to %d %q", host, port, got)
		}
	})
}
