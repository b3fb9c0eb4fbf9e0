package rest_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/api/rest"
	"github.com/airlockhq/airlock/blob/disk"
	"github.com/airlockhq/airlock/store/sqlite"
)

// testFile is a file the fake executor "finds" in the workspace.
type testFile struct {
	name, contentType, data string
}

type execCall struct {
	tenant  *airlock.Tenant
	agentID string
	req     airlock.ExecuteRequest
}

// fakeExecutor records what it is asked. By default it does what the
// manager does with the store and blobs (records the run, stores the
// files, finishes it) and returns a failed program's result: exit code 3
// is a result, not an API error. fn, if set, replaces that.
type fakeExecutor struct {
	store airlock.Store
	blobs airlock.Blobs

	mu    sync.Mutex
	calls []execCall
	files []testFile
	fn    func(ctx context.Context, tenant *airlock.Tenant, agentID string, req airlock.ExecuteRequest) (*airlock.Execution, error)
}

var _ airlock.Executor = (*fakeExecutor)(nil)

func (f *fakeExecutor) Execute(ctx context.Context, tenant *airlock.Tenant, agentID string, req airlock.ExecuteRequest) (*airlock.Execution, error) {
	// The service validates the request; the front end only maps the
	// error to its problem.
	if err := req.Validate(testMaxTimeout); err != nil {
		return nil, err
	}
	f.mu.Lock()
	f.calls = append(f.calls, execCall{tenant, agentID, req})
	fn, files := f.fn, f.files
	f.mu.Unlock()
	if fn != nil {
		return fn(ctx, tenant, agentID, req)
	}
	if req.AllowNetwork { // like a node without an egress proxy
		return nil, airlock.Problem(airlock.EFORBIDDEN, "network-unavailable", "allow_network: this node has no egress proxy")
	}
	sum := sha256.Sum256([]byte(req.Code))
	e := &airlock.Execution{
		TenantID:   tenant.ID,
		AgentID:    agentID,
		Language:   req.Language,
		Image:      "default-" + string(req.Language),
		CodeSHA256: hex.EncodeToString(sum[:]),
	}
	if err := f.store.CreateExecution(ctx, e); err != nil {
		return nil, err
	}
	for _, tf := range files {
		a := airlock.Artifact{
			ID:          randomID(),
			ExecutionID: e.ID,
			TenantID:    tenant.ID,
			Filename:    tf.name,
			SizeBytes:   int64(len(tf.data)),
			ContentType: tf.contentType,
		}
		s := sha256.Sum256([]byte(tf.data))
		a.SHA256 = hex.EncodeToString(s[:])
		if _, err := f.blobs.Put(ctx, rest.ArtifactBlobKey(&a), strings.NewReader(tf.data)); err != nil {
			return nil, err
		}
		e.Artifacts = append(e.Artifacts, a)
	}
	e.Status = airlock.StatusCompleted
	e.ExitCode = 3
	e.Stdout = "hello\n"
	e.Stderr = "boom\n"
	e.DurationMS = 42
	e.PeakMemoryMB = 7
	if err := f.store.FinishExecution(ctx, e); err != nil {
		return nil, err
	}
	return e, nil
}

func (f *fakeExecutor) setFn(fn func(ctx context.Context, tenant *airlock.Tenant, agentID string, req airlock.ExecuteRequest) (*airlock.Execution, error)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fn = fn
}

func (f *fakeExecutor) setFiles(files ...testFile) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.files = files
}

func (f *fakeExecutor) callCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.calls)
}

func (f *fakeExecutor) lastCall() execCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[len(f.calls)-1]
}

func randomID() string {
	var b [10]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// syncBuffer is a log sink safe for concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// clock is a settable clock for the server.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

const testMaxTimeout = 30 * time.Second

// env is a server on a real listener with two tenants, A and B.
type env struct {
	t        *testing.T
	srv      *httptest.Server
	handler  http.Handler
	server   *rest.Server
	store    *sqlite.DB
	blobs    airlock.Blobs
	exec     *fakeExecutor
	logs     *syncBuffer
	clock    *clock
	key      []byte
	tenantA  *airlock.Tenant
	tenantB  *airlock.Tenant
	keyA     string
	keyB     string
	readyErr func() error
	readyMu  sync.Mutex
}

type tb interface {
	Helper()
	Fatalf(format string, args ...any)
	TempDir() string
	Cleanup(func())
}

// setup builds the server without a listener; opts adjust its config.
func setup(t tb, opts ...func(*rest.Config)) *env {
	t.Helper()
	ctx := context.Background()
	db, err := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(t.TempDir(), "airlock.db")})
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { db.Close() })
	blobs, err := disk.New(disk.Config{Dir: filepath.Join(t.TempDir(), "blobs")})
	if err != nil {
		t.Fatalf("open blobs: %v", err)
	}
	t.Cleanup(func() { blobs.Close() })
	e := &env{
		store: db,
		blobs: blobs,
		logs:  &syncBuffer{},
		clock: &clock{t: time.Now()},
		key:   bytes.Repeat([]byte("k"), 32),
	}
	e.exec = &fakeExecutor{store: e.store, blobs: e.blobs}
	e.tenantA, e.keyA = addTenant(t, db, "tenant-a")
	e.tenantB, e.keyB = addTenant(t, db, "tenant-b")
	cfg := rest.Config{
		Store:      e.store,
		Events:     e.store,
		Blobs:      e.blobs,
		Executor:   e.exec,
		SigningKey: e.key,
		Logger:     slog.New(slog.NewTextHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Now:        e.clock.Now,
		Ready: func(ctx context.Context) error {
			e.readyMu.Lock()
			defer e.readyMu.Unlock()
			if e.readyErr != nil {
				return e.readyErr()
			}
			return nil
		},
	}
	for _, o := range opts {
		o(&cfg)
	}
	s, err := rest.New(cfg)
	if err != nil {
		t.Fatalf("rest.New: %v", err)
	}
	e.handler, e.server = s.Handler(), s
	return e
}

// newEnv builds the server and serves it on a real listener.
func newEnv(t *testing.T, opts ...func(*rest.Config)) *env {
	t.Helper()
	e := setup(t, opts...)
	e.t = t
	e.srv = httptest.NewServer(e.handler)
	t.Cleanup(e.srv.Close)
	return e
}

func (e *env) setReady(f func() error) {
	e.readyMu.Lock()
	defer e.readyMu.Unlock()
	e.readyErr = f
}

func addTenant(t tb, db *sqlite.DB, name string) (*airlock.Tenant, string) {
	t.Helper()
	ctx := context.Background()
	tenant := &airlock.Tenant{Name: name}
	if err := db.CreateTenant(ctx, tenant); err != nil {
		t.Fatalf("create tenant: %v", err)
	}
	secret, k := airlock.NewAPIKey(tenant.ID, "", time.Now())
	if err := db.CreateAPIKey(ctx, k); err != nil {
		t.Fatalf("create key: %v", err)
	}
	return tenant, secret
}

// keyID returns the ID of the key with the secret.
func (e *env) keyID(secret string) string {
	k, err := e.store.APIKeyByHash(context.Background(), airlock.HashAPIKey(secret))
	if err != nil {
		panic(err)
	}
	return k.ID
}

// req is one request to the test server.
type req struct {
	method, path string
	key          string // bearer key; "" for none
	body         string
	header       map[string]string
}

func (e *env) do(r req) *http.Response {
	e.t.Helper()
	return e.doURL(r, e.srv.URL+r.path)
}

func (e *env) doURL(r req, url string) *http.Response {
	e.t.Helper()
	var body io.Reader
	if r.body != "" {
		body = strings.NewReader(r.body)
	}
	hr, err := http.NewRequest(r.method, url, body)
	if err != nil {
		e.t.Fatalf("new request: %v", err)
	}
	if r.key != "" {
		hr.Header.Set("Authorization", "Bearer "+r.key)
	}
	for k, v := range r.header {
		hr.Header.Set(k, v)
	}
	resp, err := e.srv.Client().Do(hr)
	if err != nil {
		e.t.Fatalf("%s %s: %v", r.method, r.path, err)
	}
	e.t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// execute posts an ExecuteRequest as A (or with key) and wants 200.
func (e *env) execute(key, body string) map[string]any {
	e.t.Helper()
	resp := e.do(req{method: "POST", path: "/v1/execute", key: key, body: body,
		header: map[string]string{"Content-Type": "application/json"}})
	var m map[string]any
	decodeJSON(e.t, resp, http.StatusOK, &m)
	return m
}

func readBody(t *testing.T, resp *http.Response) []byte {
	t.Helper()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read body: %v", err)
	}
	return b
}

// decodeJSON wants status and a JSON body, decoded into v.
func decodeJSON(t *testing.T, resp *http.Response, status int, v any) []byte {
	t.Helper()
	body := readBody(t, resp)
	if resp.StatusCode != status {
		t.Fatalf("%s %s: status %d, want %d; body %s", resp.Request.Method, resp.Request.URL.Path, resp.StatusCode, status, body)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("Content-Type %q, want application/json", ct)
	}
	if err := json.Unmarshal(body, v); err != nil {
		t.Fatalf("decode %s: %v", body, err)
	}
	return body
}

// wantProblem checks a problem response: status, media type, type URI and
// the status member, and returns the document.
func wantProblem(t *testing.T, resp *http.Response, status int, slug string) *rest.Problem {
	t.Helper()
	body := readBody(t, resp)
	if resp.StatusCode != status {
		t.Fatalf("%s %s: status %d, want %d; body %s", resp.Request.Method, resp.Request.URL.Path, resp.StatusCode, status, body)
	}
	mt, _, err := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if err != nil || mt != rest.ProblemContentType {
		t.Fatalf("Content-Type %q, want %s", resp.Header.Get("Content-Type"), rest.ProblemContentType)
	}
	var p rest.Problem
	if err := json.Unmarshal(body, &p); err != nil {
		t.Fatalf("decode problem %s: %v", body, err)
	}
	if want := rest.ProblemTypePrefix + slug; p.Type != want {
		t.Errorf("type %q, want %q (detail %q)", p.Type, want, p.Detail)
	}
	if p.Status != status {
		t.Errorf("problem status %d, want %d", p.Status, status)
	}
	if p.Title == "" {
		t.Errorf("problem has no title")
	}
	if !strings.HasPrefix(p.Instance, "urn:airlock:request:") ||
		strings.TrimPrefix(p.Instance, "urn:airlock:request:") != resp.Header.Get("X-Request-Id") {
		t.Errorf("instance %q does not name the request %q", p.Instance, resp.Header.Get("X-Request-Id"))
	}
	return &p
}

var errBoom = errors.New("boom")
