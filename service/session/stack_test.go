package session_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/api/rest"
	"github.com/airlockhq/airlock/backend/gvisor"
	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/internal/teststack"
	"github.com/airlockhq/airlock/service/session"
	"github.com/airlockhq/airlock/store/sqlite"
)

// stack is the session service, in-process and real (teststack: SQLite on
// a temp file, the built images, a gVisor backend of its own, the
// provisioner, the session manager and the HTTP API on a loopback
// server), and a typed client per tenant.
type stack struct {
	t *testing.T
	*teststack.Stack
	store   *sqlite.DB
	backend *gvisor.Backend
	mgr     *session.Manager
	cfg     session.Config
	a, b    tenantClient
}

type tenantClient struct {
	tenant *airlock.Tenant
	key    string
	c      *client.Client
}

// newStack builds the service or skips when the machine lacks root, runsc
// or images. adjust may change the session config. When the test ends
// the manager is closed and the backend's cleanup fails the test if
// anything of a sandbox is left on the host.
func newStack(t *testing.T, adjust func(*session.Config)) *stack {
	return newStackWith(t, teststack.Options{Session: adjust})
}

// newStackWith builds the service with the given options.
func newStackWith(t *testing.T, o teststack.Options) *stack {
	t.Helper()
	s := newBareStack(t, o)
	s.a = s.newTenant("tenant-a")
	s.b = s.newTenant("tenant-b")
	return s
}

// newBareStack builds the service without making tenants (a second run
// on the store of a first).
func newBareStack(t *testing.T, o teststack.Options) *stack {
	t.Helper()
	st := teststack.New(t, o)
	return &stack{t: t, Stack: st, store: st.Store, backend: st.Backend, mgr: st.Sessions, cfg: st.SessionCfg}
}

func (s *stack) newTenant(name string) tenantClient {
	s.t.Helper()
	ctx := context.Background()
	tn := &airlock.Tenant{Name: name}
	if err := s.store.CreateTenant(ctx, tn); err != nil {
		s.t.Fatal(err)
	}
	secret, key := airlock.NewAPIKey(tn.ID, "", time.Now())
	if err := s.store.CreateAPIKey(ctx, key); err != nil {
		s.t.Fatal(err)
	}
	c, err := client.New(client.Config{BaseURL: s.URL, APIKey: secret})
	if err != nil {
		s.t.Fatal(err)
	}
	return tenantClient{tenant: tn, key: secret, c: c}
}

// ctx is a context that ends with the test, or after d.
func ctxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// create makes a session for tc and fails the test on an error.
func (s *stack) create(tc tenantClient, req airlock.CreateSessionRequest) *airlock.Session {
	s.t.Helper()
	if req.Image == "" {
		req.Image = "python-ds"
	}
	sess, created, err := tc.c.CreateSession(ctxFor(s.t, 2*time.Minute), req)
	if err != nil {
		s.t.Fatalf("create session: %v", err)
	}
	if !created || sess.State != airlock.SessionReady {
		s.t.Fatalf("created %v, state %s", created, sess.State)
	}
	return sess
}

// shell runs a shell line in a session and fails the test on an API error.
func (s *stack) shell(tc tenantClient, id, line string) *airlock.Execution {
	s.t.Helper()
	e, err := tc.c.Exec(ctxFor(s.t, time.Minute), id, airlock.SessionExecRequest{Shell: line})
	if err != nil {
		s.t.Fatalf("exec %q: %v", line, err)
	}
	return e
}

// wantProblem checks that err is an API problem with the status and type.
func wantProblem(t *testing.T, what string, err error, status int, slug string) {
	t.Helper()
	var ce *client.Error
	if !errors.As(err, &ce) {
		t.Errorf("%s: got %v, want a %d %s problem", what, err, status, slug)
		return
	}
	if ce.Status != status || ce.Type != rest.ProblemTypePrefix+slug {
		t.Errorf("%s: got %d %s (%s), want %d %s", what, ce.Status, ce.Type, ce.Detail, status, slug)
	}
}

// raw sends a raw request and returns the status, content type and body.
func (s *stack) raw(method, path, key, contentType string, body io.Reader, header ...string) (int, string, string) {
	s.t.Helper()
	req, err := http.NewRequestWithContext(ctxFor(s.t, time.Minute), method, s.URL+path, body)
	if err != nil {
		s.t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Content-Type"), string(b)
}

// checkClean fails the test if anything of a sandbox is left on the host.
func (s *stack) checkClean() {
	s.t.Helper()
	if err := s.backend.CheckClean(ctxFor(s.t, time.Minute)); err != nil {
		s.t.Errorf("host not clean: %v", err)
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

func stringsReader(s string) io.Reader { return strings.NewReader(s) }

// newClientFor is a client of this stack with tc's key (a tenant of
// another stack on the same store).
func (s *stack) newClientFor(tc tenantClient) *client.Client {
	s.t.Helper()
	c, err := client.New(client.Config{BaseURL: s.URL, APIKey: tc.key})
	if err != nil {
		s.t.Fatal(err)
	}
	return c
}
