package e2b

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
)

// fakeSessions is a stand-in for the session service, for the fuzz
// targets only: they exercise this package's parsing of untrusted input
// at thousands of requests a second, which a real sandbox cannot serve.
// Everything else is tested on a real node (stack_test.go).
type fakeSessions struct {
	tenant *airlock.Tenant
	id     string
}

var _ Sessions = (*fakeSessions)(nil)

var errFake = airlock.Problem(airlock.ENOTFOUND, "file-not-found", "no such file")

func (f *fakeSessions) CreateSession(ctx context.Context, t *airlock.Tenant, req airlock.CreateSessionRequest, key string) (*airlock.Session, bool, error) {
	if err := req.Validate(t); err != nil {
		return nil, false, err
	}
	return f.session(), true, nil
}

func (f *fakeSessions) session() *airlock.Session {
	now := time.Now()
	return &airlock.Session{ID: f.id, TenantID: f.tenant.ID, State: airlock.SessionReady, CreatedAt: now, ExpiresAt: now.Add(time.Minute),
		Limits: airlock.SessionLimits{CPUs: 1, MemoryBytes: 1 << 30, MaxLifetimeS: 3600}, Network: airlock.NetworkPolicy{Mode: airlock.NetworkNone}}
}

func (f *fakeSessions) Session(ctx context.Context, t *airlock.Tenant, id string) (*airlock.Session, error) {
	if id != f.id || t.ID != f.tenant.ID {
		return nil, airlock.Problem(airlock.ENOTFOUND, "session-not-found", "no session")
	}
	return f.session(), nil
}

func (f *fakeSessions) ListSessions(ctx context.Context, t *airlock.Tenant, fl airlock.SessionFilter) (*airlock.SessionPage, error) {
	return &airlock.SessionPage{Sessions: []*airlock.Session{f.session()}}, nil
}

func (f *fakeSessions) DeleteSession(ctx context.Context, t *airlock.Tenant, id string) (*airlock.Session, error) {
	return f.Session(ctx, t, id)
}

func (f *fakeSessions) ExtendSession(ctx context.Context, t *airlock.Tenant, id string, s int) (*airlock.Session, error) {
	return f.Session(ctx, t, id)
}

func (f *fakeSessions) Exec(ctx context.Context, t *airlock.Tenant, id string, req airlock.SessionExecRequest, obs airlock.ExecObserver) (*airlock.Execution, error) {
	if err := req.Validate(time.Hour); err != nil {
		return nil, err
	}
	obs.Started("x", 42)
	obs.Stdout([]byte(strings.Join(req.Cmd, " ")))
	return &airlock.Execution{ExitCode: len(req.Cmd) % 3}, nil
}

func (f *fakeSessions) SignalExec(ctx context.Context, t *airlock.Tenant, id string, pid, sig int) error {
	return airlock.Problem(airlock.ENOTFOUND, "process-not-found", "no process")
}

func (f *fakeSessions) PutFile(ctx context.Context, t *airlock.Tenant, id, path string, size int64, r io.Reader) (*airlock.PutFileResult, error) {
	n, err := io.Copy(io.Discard, io.LimitReader(r, 1<<20))
	if err != nil {
		return nil, airlock.Problem(airlock.EINVALID, "upload-incomplete", "upload ended early")
	}
	return &airlock.PutFileResult{Path: path, Size: n}, nil
}

func (f *fakeSessions) GetFile(ctx context.Context, t *airlock.Tenant, id, path string, open func(int64) io.Writer) (int64, error) {
	if strings.HasSuffix(path, "x") {
		n, err := open(3).Write([]byte("abc"))
		return int64(n), err
	}
	return 0, errFake
}

func (f *fakeSessions) ListFiles(ctx context.Context, t *airlock.Tenant, id, path string) (*airlock.FileList, error) {
	if strings.Count(path, "/") > 6 {
		return &airlock.FileList{Path: path}, nil
	}
	return &airlock.FileList{Path: path, Entries: []airlock.FileEntry{{Name: "d", Type: "dir", Mode: "0755"}, {Name: "f", Type: "file", Mode: "0644", Size: 3}}}, nil
}

func (f *fakeSessions) DeleteFile(ctx context.Context, t *airlock.Tenant, id, path string) error {
	return errFake
}

func (f *fakeSessions) StatFile(ctx context.Context, t *airlock.Tenant, id, path string) (*airlock.FileEntry, error) {
	return &airlock.FileEntry{Name: "f", Type: "file", Mode: "0644"}, nil
}

func (f *fakeSessions) MakeDir(ctx context.Context, t *airlock.Tenant, id, path string) (*airlock.FileEntry, error) {
	return &airlock.FileEntry{Name: "d", Type: "dir", Mode: "0755"}, nil
}

func (f *fakeSessions) MoveFile(ctx context.Context, t *airlock.Tenant, id, src, dst string) (*airlock.FileEntry, error) {
	return &airlock.FileEntry{Name: "m", Type: "file", Mode: "0644"}, nil
}

func (f *fakeSessions) RemoveAll(ctx context.Context, t *airlock.Tenant, id, path string) error {
	return nil
}

func (f *fakeSessions) WriteStdin(ctx context.Context, t *airlock.Tenant, id string, pid int, b []byte) error {
	return nil
}

func (f *fakeSessions) CloseStdin(ctx context.Context, t *airlock.Tenant, id string, pid int) error {
	return nil
}

func (f *fakeSessions) CreateContext(ctx context.Context, t *airlock.Tenant, id string, req airlock.CreateContextRequest) (*airlock.CodeContext, error) {
	return &airlock.CodeContext{ID: "ctx-" + string(req.Language), Language: req.Language}, nil
}

func (f *fakeSessions) ListContexts(ctx context.Context, t *airlock.Tenant, id string) ([]*airlock.CodeContext, error) {
	return []*airlock.CodeContext{{ID: "ctx-python", Language: airlock.ContextPython}}, nil
}

func (f *fakeSessions) DeleteContext(ctx context.Context, t *airlock.Tenant, id, cid string) error {
	return nil
}

func (f *fakeSessions) RestartContext(ctx context.Context, t *airlock.Tenant, id, cid string) (*airlock.CodeContext, error) {
	return &airlock.CodeContext{ID: cid}, nil
}

func (f *fakeSessions) RunCell(ctx context.Context, t *airlock.Tenant, id, cid string, req airlock.RunCellRequest, obs airlock.CellObserver) (*airlock.CellResult, error) {
	if obs != nil {
		obs.Started(cid)
		obs.Stdout([]byte(req.Code))
		obs.Stderr([]byte("\xe2\x82"))
	}
	return &airlock.CellResult{Value: req.Code, Outputs: []airlock.CellOutput{{Type: "text/plain", Data: "p"}, {Type: "text/html", Data: "<b>"}, {Type: "image/png", Data: "iVBORw0KGgo="}}}, nil
}

func (f *fakeSessions) SetSessionNetwork(ctx context.Context, t *airlock.Tenant, id string, p airlock.NetworkPolicy) (*airlock.Session, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return f.Session(ctx, t, id)
}

func (f *fakeSessions) SessionEgress(ctx context.Context, t *airlock.Tenant, id string, fl airlock.EgressFilter) (*airlock.EgressPage, error) {
	return &airlock.EgressPage{}, nil
}

// fakeStore holds E2B records in memory, with one tenant.
type fakeStore struct {
	mu      sync.Mutex
	tenant  *airlock.Tenant
	key     string
	revoked bool
	recs    map[string]*airlock.E2BSandbox
}

func (s *fakeStore) PutE2BSandbox(ctx context.Context, r *airlock.E2BSandbox) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := *r
	s.recs[r.SandboxID] = &c
	return nil
}

func (s *fakeStore) E2BSandbox(ctx context.Context, id string) (*airlock.E2BSandbox, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.recs[id]
	if r == nil {
		return nil, fmt.Errorf("no record: %w", airlock.ErrNotFound)
	}
	c := *r
	return &c, nil
}

// fakeKeyID is the ID of the fake store's one key.
const fakeKeyID = "k1"

func (s *fakeStore) apiKey() *airlock.APIKey {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := &airlock.APIKey{ID: fakeKeyID, TenantID: s.tenant.ID, Role: airlock.RoleTenant, Hash: airlock.HashAPIKey(s.key)}
	if s.revoked {
		now := time.Now()
		k.RevokedAt = &now
	}
	return k
}

func (s *fakeStore) revoke() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.revoked = true
}

func (s *fakeStore) APIKeyByHash(ctx context.Context, hash string) (*airlock.APIKey, error) {
	if k := s.apiKey(); hash == k.Hash {
		return k, nil
	}
	return nil, airlock.ErrNotFound
}

func (s *fakeStore) APIKey(ctx context.Context, id string) (*airlock.APIKey, error) {
	if id == fakeKeyID {
		return s.apiKey(), nil
	}
	return nil, airlock.ErrNotFound
}

func (s *fakeStore) TenantByID(ctx context.Context, id string) (*airlock.Tenant, error) {
	if id == s.tenant.ID {
		return s.tenant, nil
	}
	return nil, airlock.ErrNotFound
}

// panicLog fails the test on any error a panic would log.
type panicLog struct{ t testing.TB }

func (p panicLog) Write(b []byte) (int, error) {
	if bytes.Contains(b, []byte("panic")) {
		p.t.Errorf("logged a panic: %s", b)
	}
	return len(b), nil
}

// fakeServer is a Server on the fakes, with one sandbox "sbx" of tenant
// "t" whose API key is "key".
func fakeServer(t testing.TB) (*Server, *fakeStore) {
	tn := &airlock.Tenant{ID: "t", Name: "t"}
	st := &fakeStore{tenant: tn, key: "key", recs: map[string]*airlock.E2BSandbox{
		"sbx": {SandboxID: "sbx", TenantID: "t", TemplateID: "base"},
	}}
	s, err := New(Config{
		Sessions: &fakeSessions{tenant: tn, id: "sbx"}, Store: st, Tenants: st, Secret: bytes.Repeat([]byte{7}, 32),
		MaxLifetime: time.Hour, MaxProcessTimeout: time.Minute,
		Logger: slog.New(slog.NewTextHandler(panicLog{t}, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	return s, st
}
