package broker_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/iotest"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/service/broker"
)

const secret = "tok_9f8e7d6c5b4a39281706f5e4d3c2b1a0"

type recorder struct {
	mu  sync.Mutex
	evs []*airlock.EgressEvent
}

func (r *recorder) record(ev *airlock.EgressEvent) {
	r.mu.Lock()
	r.evs = append(r.evs, ev)
	r.mu.Unlock()
}

func (r *recorder) last() *airlock.EgressEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.evs[len(r.evs)-1]
}

// upstream answers with what it saw, a cookie, a header and a body that
// echo the credential (a careless upstream), and a plain header.
func upstream(t *testing.T, seen *http.Header) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		*seen = r.Header.Clone()
		w.Header().Set("Set-Cookie", "session=abc")
		w.Header().Set("X-Echo-Auth", r.Header.Get("Authorization"))
		w.Header().Set("X-Plain", "kept")
		io.WriteString(w, "ticket "+r.URL.Path+" for "+r.Header.Get("Authorization")+" end")
	}))
	t.Cleanup(srv.Close)
	return srv
}

// grants is the store's grants: tenant ID to scopes, and tenants' names.
type grants struct {
	mu     sync.Mutex
	scopes map[string][]string
	names  map[string]string
	err    error
}

func (g *grants) BrokerGrants(_ context.Context, tenantID string) ([]string, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.scopes[tenantID], g.err
}

func (g *grants) TenantByID(_ context.Context, id string) (*airlock.Tenant, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if n, ok := g.names[id]; ok {
		return &airlock.Tenant{ID: id, Name: n}, nil
	}
	return nil, airlock.ErrNotFound
}

func (g *grants) set(tenantID string, scopes ...string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.scopes[tenantID] = scopes
}

// newBroker makes a broker with two scopes: tickets.read granted to t1
// by the config file, tickets.write by the store (see newGrants).
func newBroker(t *testing.T, url string, rec *recorder) *broker.Broker {
	t.Helper()
	return newBrokerWith(t, url, rec, newGrants())
}

func newGrants() *grants {
	return &grants{scopes: map[string][]string{"t1": {"tickets.write"}}, names: map[string]string{"t1": "acme", "t2": "globex", "t3": "initech"}}
}

func newBrokerWith(t *testing.T, url string, rec *recorder, g *grants) *broker.Broker {
	t.Helper()
	dir := t.TempDir()
	cred := filepath.Join(dir, "tickets.token")
	if err := os.WriteFile(cred, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	b, err := broker.New(broker.Config{
		Scopes: []broker.Scope{{
			Name:       "tickets.read",
			Upstream:   url + "/api",
			Methods:    []string{"GET"},
			Paths:      []string{"/v1/tickets/*", "/v1/search/**"},
			Credential: broker.Credential{File: cred},
			Tenants:    []string{"t1", "initech"},
		}, {
			Name:       "tickets.write",
			Upstream:   url + "/api",
			Methods:    []string{"POST"},
			Paths:      []string{"/v1/tickets"},
			Credential: broker.Credential{Env: "TICKETS_WRITE"},
			Header:     "X-Api-Key",
			Format:     "{credential}",
		}},
		Record: rec.record,
		Grants: g,
		Getenv: func(k string) string {
			if k == "TICKETS_WRITE" {
				return "w-" + secret
			}
			return ""
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func call(b *broker.Broker, method, path string, scopes ...string) *httptest.ResponseRecorder {
	return callAs(b, "t1", method, path, scopes...)
}

func callAs(b *broker.Broker, tenantID, method, path string, scopes ...string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, "http://broker.airlock.internal"+path, strings.NewReader(""))
	r.Header.Set("Authorization", "Bearer forged-by-the-sandbox")
	r.Header.Set("Cookie", "x=1")
	return broker.ServeTest(b, r, airlock.BrokerCaller{TenantID: tenantID, SessionID: "s1", Scopes: scopes})
}

// A scope works only for tenants granted it (by the config file, by ID
// or name, or in the store), checked at every call: a grant taken back
// stops the next call, and a store that fails refuses.
func TestBrokerGrants(t *testing.T) {
	var seen http.Header
	srv := upstream(t, &seen)
	rec := &recorder{}
	g := newGrants()
	b := newBrokerWith(t, srv.URL, rec, g)
	ctx := context.Background()

	for _, tt := range []struct {
		tenant, scope string
		granted       bool
	}{
		{"t1", "tickets.read", true},   // config, by ID
		{"t3", "tickets.read", true},   // config, by name
		{"t1", "tickets.write", true},  // store
		{"t2", "tickets.read", false},  // another tenant
		{"t2", "tickets.write", false}, // another tenant
		{"t3", "tickets.write", false},
		{"", "tickets.read", false},
		{"nobody", "tickets.read", false},
	} {
		err := b.Granted(ctx, tt.tenant, tt.scope)
		if tt.granted && err != nil || !tt.granted && airlock.ErrorCode(err) != airlock.EFORBIDDEN {
			t.Errorf("Granted(%s, %s) = %v, want granted %v", tt.tenant, tt.scope, err, tt.granted)
		}
	}
	if err := b.Granted(ctx, "t1", "nope"); airlock.ErrorCode(err) != airlock.EINVALID {
		t.Errorf("Granted(unknown scope) = %v", err)
	}

	// A crafted call from a sandbox of t2 that claims the scope (as a
	// session admitted before the grant was taken would hold it).
	seen = nil
	w := callAs(b, "t2", "GET", "/tickets.read/v1/tickets/42", "tickets.read")
	if w.Code != http.StatusForbidden || !strings.Contains(w.Body.String(), "broker-scope-not-granted") || seen != nil {
		t.Errorf("t2's call: %d %s (reached upstream: %v)", w.Code, w.Body, seen != nil)
	}
	if ev := rec.last(); ev.Verdict != airlock.VerdictDenied || ev.Reason != "scope-not-granted" || ev.TenantID != "t2" {
		t.Errorf("event %+v", ev)
	}

	// Granted, then taken back: the very next call is refused.
	if w := call(b, "POST", "/tickets.write/v1/tickets", "tickets.write"); w.Code != 200 {
		t.Fatalf("granted call: %d %s", w.Code, w.Body)
	}
	g.set("t1")
	seen = nil
	if w := call(b, "POST", "/tickets.write/v1/tickets", "tickets.write"); w.Code != http.StatusForbidden || seen != nil {
		t.Errorf("call after the grant was taken back: %d %s", w.Code, w.Body)
	}

	// A store that fails refuses (503), never lets the call through.
	g.mu.Lock()
	g.err = errors.New("store down")
	g.mu.Unlock()
	seen = nil
	if w := callAs(b, "t2", "POST", "/tickets.write/v1/tickets", "tickets.write"); w.Code != http.StatusServiceUnavailable || seen != nil {
		t.Errorf("call with the store down: %d %s", w.Code, w.Body)
	}
}

func TestBrokerInScope(t *testing.T) {
	var seen http.Header
	srv := upstream(t, &seen)
	rec := &recorder{}
	b := newBroker(t, srv.URL, rec)
	w := call(b, "GET", "/tickets.read/v1/tickets/42?x=1", "tickets.read")
	if w.Code != 200 {
		t.Fatalf("status %d: %s", w.Code, w.Body)
	}
	if got := seen.Get("Authorization"); got != "Bearer "+secret {
		t.Errorf("upstream saw Authorization %q, want the credential", got)
	}
	if seen.Get("Cookie") != "" {
		t.Error("the sandbox's cookie reached the upstream")
	}
	body := w.Body.String()
	if strings.Contains(body, secret) || !strings.Contains(body, "[REDACTED]") || !strings.Contains(body, "/api/v1/tickets/42") {
		t.Errorf("body %q: want the path and the credential redacted", body)
	}
	for _, h := range []string{"Set-Cookie", "X-Echo-Auth"} {
		if w.Header().Get(h) != "" {
			t.Errorf("response header %s passed: %q", h, w.Header().Get(h))
		}
	}
	if w.Header().Get("X-Plain") != "kept" {
		t.Error("a plain header was dropped")
	}
	ev := rec.last()
	if ev.Kind != airlock.EgressBroker || ev.Verdict != airlock.VerdictAllowed || ev.Name != "tickets.read" || ev.SessionID != "s1" {
		t.Errorf("event %+v", ev)
	}
	// The env credential and a custom header.
	w = call(b, "POST", "/tickets.write/v1/tickets", "tickets.write")
	if w.Code != 200 || seen.Get("X-Api-Key") != "w-"+secret || seen.Get("Authorization") != "" {
		t.Errorf("write: %d, X-Api-Key %q, Authorization %q", w.Code, seen.Get("X-Api-Key"), seen.Get("Authorization"))
	}
}

func TestBrokerOutOfScope(t *testing.T) {
	var seen http.Header
	srv := upstream(t, &seen)
	rec := &recorder{}
	b := newBroker(t, srv.URL, rec)
	tests := []struct {
		method, path string
		scopes       []string
		reason       string
	}{
		{"GET", "/tickets.read/v1/tickets/42", nil, "scope-not-held"},
		{"GET", "/tickets.read/v1/tickets/42", []string{"tickets.write"}, "scope-not-held"},
		{"GET", "/nope/v1/tickets/42", []string{"nope"}, "unknown-scope"},
		{"DELETE", "/tickets.read/v1/tickets/42", []string{"tickets.read"}, "method-not-allowed"},
		{"GET", "/tickets.read/v1/users/1", []string{"tickets.read"}, "path-not-allowed"},
		{"GET", "/tickets.read/v1/tickets/42/secrets", []string{"tickets.read"}, "path-not-allowed"},
		{"GET", "/tickets.read/v1/tickets/../users", []string{"tickets.read"}, "bad-path"},
		{"GET", "/tickets.read/v1/tickets/a%2F..%2F..%2Fusers", []string{"tickets.read"}, "bad-path"},
		{"GET", "/tickets.read//v1/tickets/1", []string{"tickets.read"}, "bad-path"},
	}
	for _, tt := range tests {
		seen = nil
		w := call(b, tt.method, tt.path, tt.scopes...)
		if w.Code != http.StatusForbidden || !strings.Contains(w.Body.String(), "broker-"+tt.reason) {
			t.Errorf("%s %s: %d %s, want 403 %s", tt.method, tt.path, w.Code, w.Body, tt.reason)
		}
		if seen != nil {
			t.Errorf("%s %s reached the upstream", tt.method, tt.path)
		}
		if ev := rec.last(); ev.Verdict != airlock.VerdictDenied || ev.Reason != tt.reason {
			t.Errorf("%s %s: event %s/%s", tt.method, tt.path, ev.Verdict, ev.Reason)
		}
	}
}

func TestBrokerConfigChecks(t *testing.T) {
	dir := t.TempDir()
	loose := filepath.Join(dir, "loose")
	os.WriteFile(loose, []byte("x"), 0o644)
	for name, sc := range map[string]broker.Scope{
		"bad name":      {Name: "a b", Upstream: "https://x.test", Methods: []string{"GET"}, Paths: []string{"/"}, Credential: broker.Credential{Env: "X"}},
		"bad upstream":  {Name: "a", Upstream: "ftp://x.test", Methods: []string{"GET"}, Paths: []string{"/"}, Credential: broker.Credential{Env: "X"}},
		"no methods":    {Name: "a", Upstream: "https://x.test", Paths: []string{"/"}, Credential: broker.Credential{Env: "X"}},
		"bad pattern":   {Name: "a", Upstream: "https://x.test", Methods: []string{"GET"}, Paths: []string{"/**/x"}, Credential: broker.Credential{Env: "X"}},
		"two sources":   {Name: "a", Upstream: "https://x.test", Methods: []string{"GET"}, Paths: []string{"/"}, Credential: broker.Credential{Env: "X", File: loose}},
		"empty env":     {Name: "a", Upstream: "https://x.test", Methods: []string{"GET"}, Paths: []string{"/"}, Credential: broker.Credential{Env: "UNSET"}},
		"readable file": {Name: "a", Upstream: "https://x.test", Methods: []string{"GET"}, Paths: []string{"/"}, Credential: broker.Credential{File: loose}},
	} {
		_, err := broker.New(broker.Config{Scopes: []broker.Scope{sc}, Record: func(*airlock.EgressEvent) {}, Getenv: func(k string) string {
			if k == "X" {
				return "v"
			}
			return ""
		}})
		if err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// The redaction finds the credential wherever the reads split it.
func TestRedactionAcrossReads(t *testing.T) {
	var seen http.Header
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = r.Header
		big := strings.Repeat("a", 40000) + secret + strings.Repeat("b", 70000) + secret
		io.Copy(w, iotest.OneByteReader(strings.NewReader(big)))
	}))
	defer srv.Close()
	b := newBroker(t, srv.URL, &recorder{})
	w := call(b, "GET", "/tickets.read/v1/tickets/1", "tickets.read")
	if bytes.Contains(w.Body.Bytes(), []byte(secret)) || strings.Count(w.Body.String(), "[REDACTED]") != 2 {
		t.Errorf("the credential survived in a %d-byte body", w.Body.Len())
	}
	_ = seen
}

func FuzzBrokerPath(f *testing.F) {
	for _, s := range []string{"/tickets.read/v1/tickets/42", "/a/../b", "/a//b", "/a/%2e%2e/b", "/"} {
		f.Add(s)
	}
	b, err := broker.New(broker.Config{
		Scopes: []broker.Scope{{Name: "s", Upstream: "http://127.0.0.1:1", Methods: []string{"GET"}, Paths: []string{"/v1/*"},
			Credential: broker.Credential{Env: "X"}}},
		Record: func(*airlock.EgressEvent) {},
		Getenv: func(string) string { return "v" },
	})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, p string) {
		r, err := http.NewRequest("GET", "http://broker.airlock.internal/", nil)
		if err != nil {
			return
		}
		r.URL.Path = p
		r.URL.RawPath = ""
		w := broker.ServeTest(b, r, airlock.BrokerCaller{Scopes: []string{"s"}})
		if w.Code == 200 {
			t.Fatalf("%q reached a dead upstream with 200", p)
		}
		if w.Code != http.StatusForbidden && !strings.HasPrefix(p, "/s/v1/") {
			t.Fatalf("%q passed the checks (%d)", p, w.Code)
		}
	})
}
