package rest_test

import (
	"context"
	"io"
	"sync"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/api/rest"
)

// fakeSessions is a SessionService for the HTTP layer's tests: it records
// the requests it gets and answers from small functions; exec and cells
// run fn, which drives the observer like the session manager does.
type fakeSessions struct {
	mu    sync.Mutex
	calls []string // method names, in order
	reqs  []any    // decoded request bodies, in order

	exec func(ctx context.Context, req airlock.SessionExecRequest, obs airlock.ExecObserver) (*airlock.Execution, error)
	cell func(ctx context.Context, req airlock.RunCellRequest, obs airlock.CellObserver) (*airlock.CellResult, error)
	// err, if set, is what every other method returns.
	err error
}

var (
	_ airlock.SessionService        = (*fakeSessions)(nil)
	_ airlock.SessionNetworkService = (*fakeSessions)(nil)
)

// withSessions puts f behind the server's session routes.
func withSessions(f *fakeSessions) func(*rest.Config) {
	return func(c *rest.Config) { c.Sessions = f }
}

func (f *fakeSessions) record(name string, req any) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, name)
	f.reqs = append(f.reqs, req)
	return f.err
}

func (f *fakeSessions) callCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.calls)
}

func (f *fakeSessions) session(id string) *airlock.Session {
	return &airlock.Session{ID: id, State: airlock.SessionReady, CreatedAt: time.Now()}
}

func (f *fakeSessions) CreateSession(ctx context.Context, tenant *airlock.Tenant, req airlock.CreateSessionRequest, key string) (*airlock.Session, bool, error) {
	if err := f.record("CreateSession", req); err != nil {
		return nil, false, err
	}
	return f.session("s1"), true, nil
}

func (f *fakeSessions) Session(ctx context.Context, tenant *airlock.Tenant, id string) (*airlock.Session, error) {
	if err := f.record("Session", nil); err != nil {
		return nil, err
	}
	return f.session(id), nil
}

func (f *fakeSessions) ListSessions(ctx context.Context, tenant *airlock.Tenant, filter airlock.SessionFilter) (*airlock.SessionPage, error) {
	if err := f.record("ListSessions", nil); err != nil {
		return nil, err
	}
	return &airlock.SessionPage{Sessions: []*airlock.Session{}}, nil
}

func (f *fakeSessions) DeleteSession(ctx context.Context, tenant *airlock.Tenant, id string) (*airlock.Session, error) {
	if err := f.record("DeleteSession", nil); err != nil {
		return nil, err
	}
	return f.session(id), nil
}

func (f *fakeSessions) ExtendSession(ctx context.Context, tenant *airlock.Tenant, id string, timeoutS int) (*airlock.Session, error) {
	if err := f.record("ExtendSession", timeoutS); err != nil {
		return nil, err
	}
	return f.session(id), nil
}

func (f *fakeSessions) Exec(ctx context.Context, tenant *airlock.Tenant, id string, req airlock.SessionExecRequest, obs airlock.ExecObserver) (*airlock.Execution, error) {
	if err := f.record("Exec", req); err != nil {
		return nil, err
	}
	if f.exec != nil {
		return f.exec(ctx, req, obs)
	}
	if obs != nil {
		obs.Started("e1", 7)
		obs.Stdout([]byte("hi\n"))
	}
	return &airlock.Execution{ID: "e1", SessionID: id, Status: airlock.StatusCompleted, Stdout: "hi\n"}, nil
}

func (f *fakeSessions) SignalExec(ctx context.Context, tenant *airlock.Tenant, id string, pid, sig int) error {
	return f.record("SignalExec", sig)
}

func (f *fakeSessions) PutFile(ctx context.Context, tenant *airlock.Tenant, id, path string, size int64, r io.Reader) (*airlock.PutFileResult, error) {
	if err := f.record("PutFile", path); err != nil {
		return nil, err
	}
	n, err := io.Copy(io.Discard, r)
	if err != nil {
		return nil, err
	}
	return &airlock.PutFileResult{Path: path, Size: n}, nil
}

func (f *fakeSessions) GetFile(ctx context.Context, tenant *airlock.Tenant, id, path string, open func(size int64) io.Writer) (int64, error) {
	if err := f.record("GetFile", path); err != nil {
		return 0, err
	}
	n, err := open(2).Write([]byte("ok"))
	return int64(n), err
}

func (f *fakeSessions) ListFiles(ctx context.Context, tenant *airlock.Tenant, id, path string) (*airlock.FileList, error) {
	if err := f.record("ListFiles", path); err != nil {
		return nil, err
	}
	return &airlock.FileList{Path: path, Entries: []airlock.FileEntry{}}, nil
}

func (f *fakeSessions) DeleteFile(ctx context.Context, tenant *airlock.Tenant, id, path string) error {
	return f.record("DeleteFile", path)
}

func (f *fakeSessions) CreateContext(ctx context.Context, tenant *airlock.Tenant, id string, req airlock.CreateContextRequest) (*airlock.CodeContext, error) {
	if err := f.record("CreateContext", req); err != nil {
		return nil, err
	}
	return &airlock.CodeContext{ID: "c1", SessionID: id, Language: req.Language, State: airlock.ContextIdle}, nil
}

func (f *fakeSessions) ListContexts(ctx context.Context, tenant *airlock.Tenant, id string) ([]*airlock.CodeContext, error) {
	if err := f.record("ListContexts", nil); err != nil {
		return nil, err
	}
	return []*airlock.CodeContext{}, nil
}

func (f *fakeSessions) DeleteContext(ctx context.Context, tenant *airlock.Tenant, id, contextID string) error {
	return f.record("DeleteContext", contextID)
}

func (f *fakeSessions) RestartContext(ctx context.Context, tenant *airlock.Tenant, id, contextID string) (*airlock.CodeContext, error) {
	if err := f.record("RestartContext", contextID); err != nil {
		return nil, err
	}
	return &airlock.CodeContext{ID: contextID, SessionID: id, State: airlock.ContextIdle}, nil
}

func (f *fakeSessions) RunCell(ctx context.Context, tenant *airlock.Tenant, id, contextID string, req airlock.RunCellRequest, obs airlock.CellObserver) (*airlock.CellResult, error) {
	if err := f.record("RunCell", req); err != nil {
		return nil, err
	}
	if f.cell != nil {
		return f.cell(ctx, req, obs)
	}
	if obs != nil {
		obs.Started(contextID)
		obs.Stdout([]byte("1\n"))
	}
	return &airlock.CellResult{ContextID: contextID, Stdout: "1\n", Outputs: []airlock.CellOutput{}, ContextState: airlock.ContextIdle}, nil
}

func (f *fakeSessions) SetSessionNetwork(ctx context.Context, tenant *airlock.Tenant, id string, p airlock.NetworkPolicy) (*airlock.Session, error) {
	if err := f.record("SetSessionNetwork", p); err != nil {
		return nil, err
	}
	return f.session(id), nil
}

func (f *fakeSessions) SessionEgress(ctx context.Context, tenant *airlock.Tenant, id string, filter airlock.EgressFilter) (*airlock.EgressPage, error) {
	if err := f.record("SessionEgress", nil); err != nil {
		return nil, err
	}
	return &airlock.EgressPage{}, nil
}
