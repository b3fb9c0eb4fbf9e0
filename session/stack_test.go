package session_test

import (
	"context"
	"crypto/rand"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/blobdir"
	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/gvisor"
	"github.com/airlockhq/airlock/httpapi"
	"github.com/airlockhq/airlock/internal/testenv"
	"github.com/airlockhq/airlock/session"
	"github.com/airlockhq/airlock/sqlite"
)

// stack is the session service, in-process and real: SQLite on a temp
// file, the built images, a gVisor backend of its own, the session manager
// and the HTTP API on a loopback server, and a typed client per tenant.
type stack struct {
	t       *testing.T
	store   *sqlite.DB
	backend *gvisor.Backend
	mgr     *session.Manager
	cfg     session.Config
	srv     *httptest.Server
	a, b    tenantClient
}

type tenantClient struct {
	tenant *airlock.Tenant
	key    string
	c      *client.Client
}

// noExecutor stands in for the one-shot manager, which these tests do not
// use.
type noExecutor struct{}

func (noExecutor) Execute(context.Context, *airlock.Tenant, string, airlock.ExecuteRequest) (*airlock.Execution, error) {
	return nil, airlock.Errorf(airlock.ENOTIMPLEMENTED, "not in this test")
}

// newStack builds the service or skips when the machine lacks root, runsc
// or images. adjust may change the session config. When the test ends
// the manager is closed and the backend's cleanup fails the test if
// anything of a sandbox is left on the host.
func newStack(t *testing.T, adjust func(*session.Config)) *stack {
	t.Helper()
	testenv.RequireRoot(t)
	testenv.RequireRunsc(t)
	images := testenv.Images(t)
	testenv.Image(t, "python-ds")
	testenv.Image(t, "base")
	backend := testenv.GVisor(t) // registered first: its clean-host check runs last
	ctx := context.Background()
	dir := t.TempDir()
	store, err := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(dir, "airlock.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	blobs, err := blobdir.New(blobdir.Config{Dir: filepath.Join(dir, "blobs")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { blobs.Close() })
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	s := &stack{t: t, store: store, backend: backend}
	s.cfg = session.Config{
		Backend:  backend,
		Images:   images,
		Store:    store,
		Sessions: store,
		Logger:   logger,
		// Small sessions, so tests are quick to set up and tear down.
		Sizes: map[airlock.SessionSize]session.Size{
			airlock.SizeSmall: {CPUs: 1, MemoryBytes: 1 << 30, DiskBytes: 512 << 20, Pids: 256},
		},
		ReapInterval: 200 * time.Millisecond,
	}
	if adjust != nil {
		adjust(&s.cfg)
	}
	s.mgr, err = session.New(s.cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := s.mgr.Close(ctx); err != nil {
			t.Errorf("close sessions: %v", err)
		}
	})
	key := make([]byte, 32)
	rand.Read(key)
	api, err := httpapi.New(httpapi.Config{
		Store:      store,
		Blobs:      blobs,
		Executor:   noExecutor{},
		Sessions:   s.mgr,
		SigningKey: key,
		Logger:     logger,
	})
	if err != nil {
		t.Fatal(err)
	}
	s.srv = httptest.NewServer(api.Handler())
	t.Cleanup(s.srv.Close)
	s.a = s.newTenant("tenant-a")
	s.b = s.newTenant("tenant-b")
	return s
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
	c, err := client.New(client.Config{BaseURL: s.srv.URL, APIKey: secret})
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
	if ce.Status != status || ce.Type != httpapi.ProblemTypePrefix+slug {
		t.Errorf("%s: got %d %s (%s), want %d %s", what, ce.Status, ce.Type, ce.Detail, status, slug)
	}
}

// raw sends a raw request and returns the status, content type and body.
func (s *stack) raw(method, path, key, contentType string, body io.Reader, header ...string) (int, string, string) {
	s.t.Helper()
	req, err := http.NewRequestWithContext(ctxFor(s.t, time.Minute), method, s.srv.URL+path, body)
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
