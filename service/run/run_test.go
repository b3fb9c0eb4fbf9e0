package run_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/agent"
	"github.com/airlockhq/airlock/agent/protocol"
	"github.com/airlockhq/airlock/service/run"
	"github.com/airlockhq/airlock/store/sqlite"
)

func TestMain(m *testing.M) {
	agent.RunHelperIfAsked() // the in-process agent starts programs under a memory limit through this binary
	os.Exit(m.Run())
}

// hostSandbox is a sandbox of these tests: the real agent, served in this
// process over a pipe, running programs on the host in a temporary
// workspace. What the runner decides (deadline, kill, caps, records) is
// the same whatever stands behind the agent.
type hostSandbox struct {
	agent   *protocol.Client
	ws      string
	done    chan struct{}
	mu      sync.Mutex
	stopped bool
}

func (s *hostSandbox) ID() string                    { return "host" }
func (s *hostSandbox) Agent() airlock.Agent          { return s.agent }
func (s *hostSandbox) WorkspaceDir() string          { return s.ws }
func (s *hostSandbox) Done() <-chan struct{}         { return s.done }
func (s *hostSandbox) Destroy(context.Context) error { return nil }
func (s *hostSandbox) Stats(context.Context) (airlock.Stats, error) {
	return airlock.Stats{PeakMemoryBytes: 3 << 20}, nil
}
func (s *hostSandbox) Stop(context.Context) error {
	s.mu.Lock()
	s.stopped = true
	s.mu.Unlock()
	return nil
}

// target is a held sandbox with a backend and a start source.
type target struct{ sb *hostSandbox }

func (t target) Sandbox() airlock.Sandbox { return t.sb }
func (t target) BackendName() string      { return "host" }
func (t target) StartSource() string      { return airlock.StartPool }
func (t target) Accelerator() string      { return "tcg" }

type fixture struct {
	r      *run.Runner
	store  *sqlite.DB
	tenant *airlock.Tenant
	sb     *hostSandbox
	// agentConn is the agent's end of its connection: closing it is the
	// agent dying, as far as the host can tell.
	agentConn net.Conn
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	if _, err := exec.LookPath("sh"); err != nil {
		t.Fatal("no sh on this machine")
	}
	ctx, cancel := context.WithCancel(context.Background())
	hostSide, agentSide := net.Pipe()
	ws := t.TempDir()
	served := make(chan error, 1)
	go func() {
		served <- agent.Serve(ctx, agentSide, agent.Config{Workspace: ws, Env: []string{"PATH=/usr/local/bin:/usr/bin:/bin", "LC_ALL=C"}})
	}()
	c := protocol.NewClient(hostSide)
	t.Cleanup(func() {
		cancel()
		c.Close()
		agentSide.Close()
		<-served
	})
	if _, err := c.WaitHello(ctx); err != nil {
		t.Fatal(err)
	}
	store, err := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(t.TempDir(), "db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	tenant := &airlock.Tenant{Name: "t"}
	if err := store.CreateTenant(ctx, tenant); err != nil {
		t.Fatal(err)
	}
	r, err := run.New(run.Config{Store: store, KillGrace: 300 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{r: r, store: store, tenant: tenant, sb: &hostSandbox{agent: c, ws: ws, done: make(chan struct{})}, agentConn: agentSide}
}

func (f *fixture) begin(t *testing.T, code string) *airlock.Execution {
	t.Helper()
	e, err := f.r.Begin(context.Background(), run.Record{TenantID: f.tenant.ID, Language: airlock.Bash, Image: "base", Code: code, Backend: "host"})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func (f *fixture) job(code string, timeout time.Duration, out int64) run.Job {
	return run.Job{
		Target:  target{f.sb},
		Program: run.Program{Argv: []string{"sh", "-c", code}, Timeout: timeout, OutputBytes: out},
	}
}

// recorded reads back the execution's record.
func (f *fixture) recorded(t *testing.T, e *airlock.Execution) *airlock.Execution {
	t.Helper()
	got, err := f.store.Execution(context.Background(), f.tenant.ID, e.ID)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func TestProgramResultRecorded(t *testing.T) {
	f := newFixture(t)
	code := "cat in.txt; echo err >&2; exit 3"
	e := f.begin(t, code)
	j := f.job(code, 10*time.Second, 1<<20)
	j.HandIn = []run.File{{Path: "in.txt", Mode: 0o644, Content: "handed in\n"}}
	j.Acquire = 5 * time.Millisecond
	j.StopAfter = true
	collected := false
	j.Collect = func(ctx context.Context, e *airlock.Execution) error {
		collected = f.sb.stopped // after the stop
		return nil
	}
	got, err := f.r.Run(context.Background(), e, j)
	if err != nil {
		t.Fatal(err)
	}
	if !collected {
		t.Error("Collect did not run after the sandbox was stopped")
	}
	rec := f.recorded(t, got)
	if rec.Status != airlock.StatusCompleted || rec.EndedBy != "" || len(rec.LimitsHit) != 0 || rec.ExitCode != 3 || rec.Stdout != "handed in\n" || rec.Stderr != "err\n" ||
		rec.Backend != "host" || rec.Accelerator != "tcg" || rec.StartSource != airlock.StartPool || rec.PeakMemoryMB != 3 || rec.TimedOut {
		t.Errorf("record: %+v", rec)
	}
	for _, p := range []string{airlock.PhaseAcquire, airlock.PhaseHandIn, airlock.PhaseRun, airlock.PhaseCollect} {
		if _, ok := rec.Phases[p]; !ok {
			t.Errorf("phase %s missing: %v", p, rec.Phases)
		}
	}
}

func TestOutputCapped(t *testing.T) {
	f := newFixture(t)
	code := "head -c 10000 /dev/zero | tr '\\0' x"
	got, err := f.r.Run(context.Background(), f.begin(t, code), f.job(code, 10*time.Second, 100))
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Stdout) != 100 || !got.StdoutTruncated || got.StderrTruncated {
		t.Errorf("stdout %d bytes, truncated %v/%v", len(got.Stdout), got.StdoutTruncated, got.StderrTruncated)
	}
	if got.EndedBy != "" || len(got.LimitsHit) != 1 || got.LimitsHit[0] != airlock.LimitOutput {
		t.Errorf("a capped run: ended_by %q, limits_hit %v", got.EndedBy, got.LimitsHit)
	}
	if rec := f.recorded(t, got); len(rec.LimitsHit) != 1 || rec.LimitsHit[0] != airlock.LimitOutput {
		t.Errorf("the record's limits_hit: %v", rec.LimitsHit)
	}
}

// A program past its timeout is killed, and the record says so.
func TestDeadline(t *testing.T) {
	f := newFixture(t)
	code := "echo started; sleep 30"
	start := time.Now()
	got, err := f.r.Run(context.Background(), f.begin(t, code), f.job(code, time.Second, 1<<20))
	if err != nil {
		t.Fatal(err)
	}
	if !got.TimedOut || got.ExitCode != 137 || got.Stdout != "started\n" || got.Status != airlock.StatusCompleted {
		t.Errorf("timed-out program: %+v", got)
	}
	if rec := f.recorded(t, got); rec.EndedBy != airlock.LimitWallTime || len(rec.LimitsHit) != 1 || rec.LimitsHit[0] != airlock.LimitWallTime {
		t.Errorf("a timed-out run's record: ended_by %q, limits_hit %v", rec.EndedBy, rec.LimitsHit)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("the kill took %v", took)
	}
}

// The interruptions: a client that goes away kills its program and the
// record says so; an owner that ends fails the run; a server that lets go
// leaves the program and its record open.
func TestInterruptions(t *testing.T) {
	code := "echo started; sleep 30"
	t.Run("client gone", func(t *testing.T) {
		f := newFixture(t)
		ctx, cancel := context.WithCancel(context.Background())
		j := f.job(code, time.Minute, 1<<20)
		j.Observer = cancelOnOutput(cancel)
		e := f.begin(t, code)
		_, err := f.r.Run(ctx, e, j)
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("got %v", err)
		}
		if rec := f.recorded(t, e); rec.Status != airlock.StatusFailed || !strings.Contains(rec.Error, "client went away") {
			t.Errorf("record: %+v", rec)
		}
	})
	t.Run("owner ended", func(t *testing.T) {
		f := newFixture(t)
		ended := make(chan struct{})
		j := f.job(code, time.Minute, 1<<20)
		j.Ended = ended
		j.Observer = cancelOnOutput(func() { close(ended) })
		e := f.begin(t, code)
		if _, err := f.r.Run(context.Background(), e, j); !errors.Is(err, run.ErrEnded) {
			t.Fatalf("got %v", err)
		}
		if rec := f.recorded(t, e); rec.Status != airlock.StatusFailed {
			t.Errorf("record: %+v", rec)
		}
	})
	t.Run("detached", func(t *testing.T) {
		f := newFixture(t)
		detached := make(chan struct{})
		j := f.job(code, time.Minute, 1<<20)
		j.Detached = detached
		j.Observer = cancelOnOutput(func() { close(detached) })
		e := f.begin(t, code)
		_, err := f.r.Run(context.Background(), e, j)
		var ae *airlock.Error
		if !errors.As(err, &ae) || ae.Type != run.ProblemServerRestarting || airlock.RetryAfterOf(err) == 0 {
			t.Fatalf("got %v", err)
		}
		if rec := f.recorded(t, e); rec.Status != airlock.StatusRunning {
			t.Errorf("the record of a run the server let go of: %+v", rec)
		}
	})
}

// cancelOnOutput is an observer that calls f at the first output.
func cancelOnOutput(f func()) airlock.ExecObserver {
	var once sync.Once
	return observer(func([]byte) { once.Do(f) })
}

type observer func([]byte)

func (o observer) Started(string, int) {}
func (o observer) Stdout(p []byte)     { o(p) }
func (o observer) Stderr(p []byte)     { o(p) }

// A failed hand-in is the sandbox's failure, recorded.
func TestHandInFails(t *testing.T) {
	f := newFixture(t)
	e := f.begin(t, "true")
	j := f.job("true", time.Minute, 1<<20)
	j.HandIn = []run.File{{Path: "../outside", Content: "x"}}
	_, err := f.r.Run(context.Background(), e, j)
	var ae *airlock.Error
	if !errors.As(err, &ae) || ae.Type != run.ProblemSandboxFailed {
		t.Fatalf("got %v", err)
	}
	if rec := f.recorded(t, e); rec.Status != airlock.StatusFailed || !strings.Contains(rec.Error, "../outside") {
		t.Errorf("record: %+v", rec)
	}
}

// A cell's record: exit code 1 when it raised, its output.
func TestCellRecorded(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Fatal("python3 is needed for code contexts")
	}
	f := newFixture(t)
	ctx := context.Background()
	if _, err := f.sb.agent.CreateContext(ctx, protocol.ContextRequest{ID: "c1", Language: protocol.ContextPython}); err != nil {
		t.Fatal(err)
	}
	e, err := f.r.Begin(ctx, run.Record{TenantID: f.tenant.ID, SessionID: "s", Language: airlock.Python, Image: "base", Code: "x", Backend: "host"})
	if err != nil {
		t.Fatal(err)
	}
	res, err := f.r.RunCell(ctx, e, run.Cell{Target: target{f.sb}, ContextID: "c1", Code: "print('hi'); 1/0", Timeout: 10 * time.Second, OutputBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	rec := f.recorded(t, e)
	if res.Error == nil || rec.ExitCode != 1 || rec.Stdout != "hi\n" || rec.Status != airlock.StatusCompleted || rec.StartSource != airlock.StartPool || rec.Accelerator != "tcg" {
		t.Errorf("cell %+v, record %+v", res, rec)
	}
}

// busyStore fails FinishExecution with a busy store a few times.
type busyStore struct {
	*sqlite.DB
	mu    sync.Mutex
	fails int
}

func (b *busyStore) FinishExecution(ctx context.Context, e *airlock.Execution) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.fails > 0 {
		b.fails--
		return &airlock.Error{Code: airlock.EUNAVAILABLE, Type: "store-busy", Message: "busy"}
	}
	return b.DB.FinishExecution(ctx, e)
}

// A result is not lost to a store busy for a moment: the runner tries
// again.
func TestResultSurvivesBusyStore(t *testing.T) {
	f := newFixture(t)
	bs := &busyStore{DB: f.store, fails: 3}
	r, err := run.New(run.Config{Store: bs, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	e, err := r.Begin(context.Background(), run.Record{TenantID: f.tenant.ID, Language: airlock.Bash, Code: "echo ok", Backend: "host"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Run(context.Background(), e, f.job("echo ok", 10*time.Second, 1<<20)); err != nil {
		t.Fatal(err)
	}
	if rec := f.recorded(t, e); rec.Status != airlock.StatusCompleted || rec.Stdout != "ok\n" || bs.fails != 0 {
		t.Errorf("record after a busy store: %+v (fails left %d)", rec, bs.fails)
	}
}

// BenchmarkRun is the host-side cost of one run without a sandbox
// kernel: the record (SQLite), the hand-in, the agent starting `true` on
// this host and reporting its exit, and the result written.
func BenchmarkRun(b *testing.B) {
	f := newFixture(b)
	ctx := context.Background()
	for b.Loop() {
		e, err := f.r.Begin(ctx, run.Record{TenantID: f.tenant.ID, Language: airlock.Bash, Code: "true", Backend: "host"})
		if err != nil {
			b.Fatal(err)
		}
		j := f.job("true", 10*time.Second, 1<<20)
		j.HandIn = []run.File{{Path: "/tmp/main.sh", Mode: 0o644, Content: "true\n"}}
		if _, err := f.r.Run(ctx, e, j); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRecordOnly is the cost of the record alone: the row written
// when a run starts and its outcome.
func BenchmarkRecordOnly(b *testing.B) {
	f := newFixture(b)
	ctx := context.Background()
	for b.Loop() {
		e, err := f.r.Begin(ctx, run.Record{TenantID: f.tenant.ID, Language: airlock.Bash, Code: "true", Backend: "host"})
		if err != nil {
			b.Fatal(err)
		}
		if err := f.r.Fail(ctx, e, errors.New("not run")); err != nil {
			b.Fatal(err)
		}
	}
}

// orderObserver records the order of its calls.
type orderObserver struct {
	mu     sync.Mutex
	events []string
}

func (o *orderObserver) add(s string) {
	o.mu.Lock()
	o.events = append(o.events, s)
	o.mu.Unlock()
}
func (o *orderObserver) Started(string, int) { o.add("started") }
func (o *orderObserver) Stdout(p []byte)     { o.add("stdout:" + string(p)) }
func (o *orderObserver) Stderr(p []byte)     { o.add("stderr:" + string(p)) }

// An observer hears that the program started before any of its output,
// however fast the program writes.
func TestObserverHearsStartFirst(t *testing.T) {
	f := newFixture(t)
	for range 5 {
		o := &orderObserver{}
		j := f.job("echo fast", 10*time.Second, 1<<20)
		j.Observer = o
		if _, err := f.r.Run(context.Background(), f.begin(t, "echo fast"), j); err != nil {
			t.Fatal(err)
		}
		o.mu.Lock()
		if len(o.events) < 2 || o.events[0] != "started" || strings.Join(o.events[1:], "") != "stdout:fast\n" {
			t.Errorf("observer heard %q", o.events)
		}
		o.mu.Unlock()
	}
}
