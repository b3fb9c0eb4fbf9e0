package e2e_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/api/rest"
	"github.com/airlockhq/airlock/backend/gvisor"
	"github.com/airlockhq/airlock/blob/disk"
	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/internal/testenv/testreq"
	"github.com/airlockhq/airlock/internal/teststack"
	"github.com/airlockhq/airlock/service/provision"
	"github.com/airlockhq/airlock/store/sqlite"
)

// maxTimeout is the longest timeout_sec the test stack accepts.
const maxTimeout = 60 * time.Second

// tenantKey is a tenant of the stack with its API key and a client for it.
type tenantKey struct {
	tenant *airlock.Tenant
	key    string
	client *client.Client
}

// stack is the real service, in-process: SQLite on a temp file, blobs in a
// temp directory, the built images, a gVisor backend of its own, the
// manager and the HTTP API on a loopback httptest server.
type stack struct {
	store   *sqlite.DB
	blobs   *disk.Dir
	backend *gvisor.Backend
	prov    *provision.Provisioner
	url     string

	a, b tenantKey // two tenants, for isolation checks
}

// stackMode says how the stack's manager obtains sandboxes.
type stackMode int

const (
	// cold boots a fresh sandbox for every request: no warm pool, no
	// snapshots. Nothing of the service lives between requests, so the
	// host can be checked clean after each one.
	cold stackMode = iota
	// warm runs like airlockd's defaults: base snapshots and a warm pool
	// for warmPairs, readied before the first request.
	warm
)

func (m stackMode) String() string {
	if m == warm {
		return "warm"
	}
	return "cold"
}

// warmPairs are the image/language pairs the warm stack readies, as
// airlockd does by default.
var warmPairs = []string{"python-ds/python", "base/bash", "base/node", "base/sql"}

// newStack builds the service or skips when the machine lacks root, runsc
// or images. Everything is torn down when the test ends; the backend's own
// cleanup (testenv.GVisor) fails the test if a sandbox is left on the host.
func newStack(t *testing.T, mode stackMode) *stack {
	t.Helper()
	o := teststack.Options{MaxTimeout: maxTimeout}
	if mode == warm {
		o.Snapshots = true
		o.Pool = provision.PoolConfig{Min: 1, Max: 2}
		o.Warm = warmPairs
	}
	st := teststack.New(t, o)
	s := &stack{store: st.Store, blobs: st.Blobs, backend: st.Backend, prov: st.Provisioner, url: st.URL}
	s.a = s.newTenant(t, "tenant-a")
	s.b = s.newTenant(t, "tenant-b")
	return s
}

// newTenant creates a tenant and an API key for it in the store.
func (s *stack) newTenant(t *testing.T, name string) tenantKey {
	t.Helper()
	ctx := context.Background()
	tn := &airlock.Tenant{Name: name}
	if err := s.store.CreateTenant(ctx, tn); err != nil {
		t.Fatal(err)
	}
	secret, key := airlock.NewAPIKey(tn.ID, "", time.Now())
	if err := s.store.CreateAPIKey(ctx, key); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(client.Config{BaseURL: s.url, APIKey: secret})
	if err != nil {
		t.Fatal(err)
	}
	return tenantKey{tenant: tn, key: secret, client: c}
}

// waitClean fails the test unless nothing of a sandbox is left on the
// host within a minute. Used sandboxes are destroyed in the background
// after the response, so it polls.
func (s *stack) waitClean(t *testing.T, what string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var err error
	for {
		if err = s.backend.CheckClean(ctx); err == nil {
			return
		}
		select {
		case <-ctx.Done():
			t.Errorf("%s: host not clean after a minute: %v", what, err)
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// close stops the manager, which destroys its pool members and waits for
// its background work, and then checks the host is clean.
func (s *stack) close(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := s.prov.Close(ctx); err != nil {
		t.Errorf("close the provisioner: %v", err)
	}
	s.waitClean(t, "after the manager closed")
}

// waitWarm waits until the warm pool holds a member of every warm pair,
// so that requests are served warm.
func (s *stack) waitWarm(t *testing.T) {
	t.Helper()
	start := time.Now()
	n, mem := 0, int64(0)
	if !testreq.Poll(3*time.Minute, func() bool {
		n, mem = s.prov.PoolStats()
		return n >= len(warmPairs)
	}) {
		t.Fatalf("warm pool has %d members after %v, want %d", n, time.Since(start), len(warmPairs))
	}
	t.Logf("warm pool: %d members (%d MiB) after %v", n, mem>>20, time.Since(start).Round(time.Millisecond))
}

// runsDir is where the stack's gVisor backend keeps a directory per live
// sandbox; the sandbox's /workspace and /tmp are its disk/workspace and
// disk/tmp (the crash test knows this layout too).
func (s *stack) runsDir() string {
	return filepath.Join(s.backend.Config().StateDir, "sandboxes")
}

// execute runs req as tenant A and fails the test on an API error.
func (s *stack) execute(t *testing.T, req airlock.ExecuteRequest, opts ...client.ExecuteOption) *airlock.Execution {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*maxTimeout)
	defer cancel()
	e, err := s.a.client.Execute(ctx, req, opts...)
	if err != nil {
		t.Fatalf("execute %s %.60q: %v", req.Language, req.Code, err)
	}
	return e
}

// rawResponse is an HTTP response read in full.
type rawResponse struct {
	status int
	header http.Header
	body   []byte
}

// do sends a raw request to the stack. key "" sends no Authorization.
func (s *stack) do(t *testing.T, method, path, key string, body io.Reader, header map[string]string) rawResponse {
	t.Helper()
	u := path
	if !strings.HasPrefix(u, "http") {
		u = s.url + path
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*maxTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read body: %v", method, path, err)
	}
	return rawResponse{status: resp.StatusCode, header: resp.Header, body: b}
}

// problemDoc is an RFC 9457 problem as the API sends it.
type problemDoc struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail"`
	Code   string `json:"code"`
}

// problem checks that r is a problem response with the status and returns it.
func (r rawResponse) problem(t *testing.T, status int) problemDoc {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d; body %.300s", r.status, status, r.body)
	}
	if ct := r.header.Get("Content-Type"); ct != rest.ProblemContentType {
		t.Errorf("Content-Type %q, want %q", ct, rest.ProblemContentType)
	}
	var p problemDoc
	if err := json.Unmarshal(r.body, &p); err != nil {
		t.Fatalf("problem body is not JSON: %v: %.300s", err, r.body)
	}
	if p.Status != status || p.Title == "" || !strings.HasPrefix(p.Type, rest.ProblemTypePrefix) {
		t.Errorf("problem %+v: want status %d, a title and a %s type", p, status, rest.ProblemTypePrefix)
	}
	return p
}
