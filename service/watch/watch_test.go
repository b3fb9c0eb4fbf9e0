package watch_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/service/watch"
)

// fakeSessions runs "programs" that the test drives step by step.
type fakeSessions struct {
	airlock.SessionService // nil: a method the tests do not use panics
	mu                     sync.Mutex
	live                   map[string]string // session ID -> tenant ID
	steps                  chan func(obs airlock.ExecObserver) *airlock.Execution
}

func newFake() *fakeSessions {
	return &fakeSessions{live: map[string]string{"s1": "t1"}, steps: make(chan func(airlock.ExecObserver) *airlock.Execution)}
}

func (f *fakeSessions) Session(_ context.Context, tenant *airlock.Tenant, id string) (*airlock.Session, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	owner, ok := f.live[id]
	if !ok || owner != tenant.ID {
		return nil, airlock.Problem(airlock.ENOTFOUND, "session-not-found", "no session %s", id)
	}
	return &airlock.Session{ID: id, TenantID: owner, State: airlock.SessionReady}, nil
}

func (f *fakeSessions) DeleteSession(_ context.Context, tenant *airlock.Tenant, id string) (*airlock.Session, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.live, id)
	return &airlock.Session{ID: id, State: airlock.SessionDestroyed}, nil
}

// Exec runs the steps the test sends until one returns an execution.
func (f *fakeSessions) Exec(ctx context.Context, _ *airlock.Tenant, id string, req airlock.SessionExecRequest, obs airlock.ExecObserver) (*airlock.Execution, error) {
	if req.Shell == "fail" {
		return nil, airlock.Problem(airlock.ECONFLICT, "session-busy", "no")
	}
	for step := range f.steps {
		if e := step(obs); e != nil {
			return e, nil
		}
	}
	return nil, errors.New("steps closed")
}

func (f *fakeSessions) RunCell(_ context.Context, _ *airlock.Tenant, id, cid string, req airlock.RunCellRequest, obs airlock.CellObserver) (*airlock.CellResult, error) {
	obs.Started(cid)
	obs.Stdout([]byte("cell out\n"))
	return &airlock.CellResult{ContextID: cid, ExecutionID: "ec", Error: &airlock.CellError{Name: "ValueError"}}, nil
}

var tenant = &airlock.Tenant{ID: "t1", Name: "t1"}

func next(t *testing.T, f airlock.SessionFeed) airlock.SessionEvent {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ev, err := f.Next(ctx)
	if err != nil {
		t.Fatalf("next event: %v", err)
	}
	return ev
}

func newService(t *testing.T, cfg watch.Config) (*fakeSessions, airlock.SessionWatcher, *watch.Service) {
	f := newFake()
	cfg.Sessions = f
	svc, err := watch.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return f, svc, svc
}

func TestWatchLiveAndReplay(t *testing.T) {
	f, w, svc := newService(t, watch.Config{KeepBytes: 8})
	type result struct {
		e   *airlock.Execution
		err error
	}
	done := make(chan result, 1)
	go func() {
		e, err := svc.Exec(context.Background(), tenant, "s1", airlock.SessionExecRequest{Shell: "echo " + strings.Repeat("x", 300)}, nil)
		done <- result{e, err}
	}()
	// Output before the start waits for it; the watcher that comes
	// first sees everything in order.
	early, err := w.WatchSession(context.Background(), tenant, "s1")
	if err != nil {
		t.Fatal(err)
	}
	defer early.Close()
	f.steps <- func(obs airlock.ExecObserver) *airlock.Execution { obs.Stdout([]byte("a")); return nil }
	f.steps <- func(obs airlock.ExecObserver) *airlock.Execution { obs.Started("e1", 42); return nil }
	f.steps <- func(obs airlock.ExecObserver) *airlock.Execution {
		obs.Stdout([]byte("bcdefghij"))
		obs.Stderr([]byte("E"))
		return nil
	}
	ev := next(t, early)
	if ev.Type != airlock.EventStart || ev.ExecutionID != "e1" || ev.PID != 42 || ev.Kind != "exec" || ev.Replay ||
		len([]rune(ev.Command)) != 201 || !strings.HasSuffix(ev.Command, "…") {
		t.Fatalf("start: %+v", ev)
	}
	run := ev.Run
	for _, want := range []struct{ typ, data string }{{"stdout", "a"}, {"stdout", "bcdefghij"}, {"stderr", "E"}} {
		ev = next(t, early)
		if ev.Type != want.typ || string(ev.Data) != want.data || ev.Run != run {
			t.Fatalf("event %+v, want %s %q", ev, want.typ, want.data)
		}
	}
	// A late watcher gets the start and the last kept output, marked.
	late, err := w.WatchSession(context.Background(), tenant, "s1")
	if err != nil {
		t.Fatal(err)
	}
	defer late.Close()
	ev = next(t, late)
	if ev.Type != airlock.EventStart || !ev.Replay || !ev.EarlierDropped || ev.Run != run {
		t.Fatalf("late start: %+v", ev)
	}
	ev = next(t, late)
	if ev.Type != "stderr" || !ev.Replay { // only the last chunk fits in 8 bytes
		t.Fatalf("late replay: %+v", ev)
	}
	f.steps <- func(obs airlock.ExecObserver) *airlock.Execution {
		return &airlock.Execution{ID: "e1", ExitCode: 3, DurationMS: 5}
	}
	r := <-done
	if r.err != nil || r.e.ExitCode != 3 {
		t.Fatalf("exec result passed through: %+v %v", r.e, r.err)
	}
	for _, fd := range []airlock.SessionFeed{early, late} {
		ev = next(t, fd)
		if ev.Type != airlock.EventEnd || ev.ExitCode == nil || *ev.ExitCode != 3 || ev.ExecutionID != "e1" || ev.Run != run {
			t.Fatalf("end: %+v", ev)
		}
	}

	// A cell: start with its context, output, end with its exception.
	if _, err := svc.RunCell(context.Background(), tenant, "s1", "c1", airlock.RunCellRequest{Code: "raise ValueError\nmore"}, nil); err != nil {
		t.Fatal(err)
	}
	ev = next(t, early)
	if ev.Type != airlock.EventStart || ev.Kind != "cell" || ev.ContextID != "c1" || ev.Command != "raise ValueError" {
		t.Fatalf("cell start: %+v", ev)
	}
	next(t, early)
	ev = next(t, early)
	if ev.Type != airlock.EventEnd || *ev.ExitCode != 1 || ev.Error != "ValueError" || ev.ExecutionID != "ec" {
		t.Fatalf("cell end: %+v", ev)
	}

	// A call that fails before its program starts publishes nothing.
	if _, err := svc.Exec(context.Background(), tenant, "s1", airlock.SessionExecRequest{Shell: "fail"}, nil); airlock.ErrorCode(err) != airlock.ECONFLICT {
		t.Fatalf("failing exec: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if ev, err := early.Next(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("after a failed call: %+v %v", ev, err)
	}

	// Deleting the session ends its watches.
	if _, err := svc.DeleteSession(context.Background(), tenant, "s1"); err != nil {
		t.Fatal(err)
	}
	if _, err := early.Next(context.Background()); airlock.ErrorCode(err) != airlock.ECONFLICT {
		t.Fatalf("after delete: %v", err)
	}
}

func TestWatchRefusals(t *testing.T) {
	_, w, _ := newService(t, watch.Config{MaxWatchers: 2})
	if _, err := w.WatchSession(context.Background(), &airlock.Tenant{ID: "t2"}, "s1"); airlock.ErrorCode(err) != airlock.ENOTFOUND {
		t.Errorf("another tenant's session: %v", err)
	}
	if _, err := w.WatchSession(context.Background(), tenant, "nope"); airlock.ErrorCode(err) != airlock.ENOTFOUND {
		t.Errorf("a missing session: %v", err)
	}
	a, _ := w.WatchSession(context.Background(), tenant, "s1")
	b, _ := w.WatchSession(context.Background(), tenant, "s1")
	if _, err := w.WatchSession(context.Background(), tenant, "s1"); airlock.ErrorCode(err) != airlock.ERATELIMITED {
		t.Errorf("a third watcher: %v", err)
	}
	a.Close()
	c, err := w.WatchSession(context.Background(), tenant, "s1")
	if err != nil {
		t.Errorf("a watcher after one closed: %v", err)
	}
	b.Close()
	c.Close()
}

// A watcher that does not read is dropped; the program and the other
// watchers go on.
func TestSlowWatcherDropped(t *testing.T) {
	f, w, svc := newService(t, watch.Config{QueueBytes: 4096})
	slow, _ := w.WatchSession(context.Background(), tenant, "s1")
	defer slow.Close()
	fast, _ := w.WatchSession(context.Background(), tenant, "s1")
	defer fast.Close()
	done := make(chan *airlock.Execution, 1)
	go func() {
		e, _ := svc.Exec(context.Background(), tenant, "s1", airlock.SessionExecRequest{Shell: "yes"}, nil)
		done <- e
	}()
	f.steps <- func(obs airlock.ExecObserver) *airlock.Execution { obs.Started("e2", 7); return nil }
	got := 0
	for i := 0; i < 20; i++ {
		f.steps <- func(obs airlock.ExecObserver) *airlock.Execution { obs.Stdout(make([]byte, 1000)); return nil }
		for {
			ev := next(t, fast)
			if ev.Type == airlock.EventStdout {
				got += len(ev.Data)
				break
			}
		}
	}
	f.steps <- func(obs airlock.ExecObserver) *airlock.Execution { return &airlock.Execution{ID: "e2"} }
	<-done
	if got != 20000 {
		t.Errorf("the reading watcher got %d bytes, want 20000", got)
	}
	var err error
	for err == nil {
		_, err = slow.Next(context.Background())
	}
	if !airlock.IsWatchDropped(err) {
		t.Errorf("the slow watcher ended with %v, want ErrWatchDropped", err)
	}
}

// Close ends every watch with shutting-down and refuses new ones; a
// service without a network side says so like the HTTP layer would.
func TestClose(t *testing.T) {
	_, w, svc := newService(t, watch.Config{})
	a, err := w.WatchSession(context.Background(), tenant, "s1")
	if err != nil {
		t.Fatal(err)
	}
	svc.Close()
	if _, err := a.Next(context.Background()); airlock.ErrorCode(err) != airlock.EUNAVAILABLE {
		t.Errorf("after Close: %v", err)
	}
	if _, err := w.WatchSession(context.Background(), tenant, "s1"); airlock.ErrorCode(err) != airlock.EUNAVAILABLE {
		t.Errorf("a watch after Close: %v", err)
	}
	if _, err := svc.SessionEgress(context.Background(), tenant, "s1", airlock.EgressFilter{}); airlock.ErrorCode(err) != airlock.ENOTIMPLEMENTED {
		t.Errorf("egress without a network side: %v", err)
	}
}
