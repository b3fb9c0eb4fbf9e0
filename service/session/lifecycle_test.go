package session_test

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/backend/gvisor"
	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/internal/testenv"
	"github.com/airlockhq/airlock/internal/testenv/testreq"
	"github.com/airlockhq/airlock/internal/teststack"
	"github.com/airlockhq/airlock/service/session"
	"github.com/airlockhq/airlock/store/sqlite"
)

// Concurrent retries of one creation with the same Idempotency-Key make
// one sandbox: the first gets 201, every other the same session with 200,
// even those that arrive while it is still being made.
func TestIdempotentCreateRace(t *testing.T) {
	s := newStack(t, nil)
	ctx := ctxFor(t, 2*time.Minute)
	req := airlock.CreateSessionRequest{Image: "base", TimeoutS: 300, Network: &airlock.NetworkPolicy{Mode: "none"}}
	const n = 8
	var wg sync.WaitGroup
	type result struct {
		s       *airlock.Session
		created bool
		err     error
	}
	results := make([]result, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			sess, created, err := s.a.c.CreateSession(ctx, req, client.WithIdempotencyKey("run-7f3a:step-12"))
			results[i] = result{sess, created, err}
		}(i)
	}
	wg.Wait()
	created := 0
	for i, r := range results {
		if r.err != nil {
			t.Fatalf("request %d: %v", i, r.err)
		}
		if r.created {
			created++
		}
		if r.s.ID != results[0].s.ID || r.s.State != airlock.SessionReady {
			t.Fatalf("request %d got session %s (%s), request 0 %s", i, r.s.ID, r.s.State, results[0].s.ID)
		}
	}
	if created != 1 {
		t.Fatalf("%d of %d requests created a session", created, n)
	}
	page, err := s.a.c.ListSessions(ctx, client.ListSessionsOptions{LiveOnly: true})
	if err != nil || len(page.Sessions) != 1 || page.Sessions[0].IdempotencyKey != "run-7f3a:step-12" {
		t.Fatalf("live sessions: %+v %v", page, err)
	}
	// A later retry (whitespace and member order do not matter) is still
	// the same session; another tenant's same key is its own.
	raw := `{ "network": {"mode": "none"}, "timeout_s": 300, "image": "base" }`
	status, _, body := s.raw("POST", "/v1/sessions", s.a.key, "application/json", stringsReader(raw), "Idempotency-Key", "run-7f3a:step-12")
	if status != 200 || !contains(body, results[0].s.ID) {
		t.Fatalf("retry: %d %s", status, body)
	}
	other, createdB, err := s.b.c.CreateSession(ctx, req, client.WithIdempotencyKey("run-7f3a:step-12"))
	if err != nil || !createdB || other.ID == results[0].s.ID {
		t.Fatalf("tenant B with the same key: %+v %v %v", other, createdB, err)
	}
	// After the session is deleted a retry still names it (the key holds
	// for 24 hours), ended as it is.
	if _, err := s.a.c.DeleteSession(ctx, results[0].s.ID); err != nil {
		t.Fatal(err)
	}
	again, createdAgain, err := s.a.c.CreateSession(ctx, req, client.WithIdempotencyKey("run-7f3a:step-12"))
	if err != nil || createdAgain || again.ID != results[0].s.ID || again.State != airlock.SessionDestroyed {
		t.Fatalf("retry after delete: %+v %v %v", again, createdAgain, err)
	}
}

// clock is a settable clock for the reaper.
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
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// The reaper ends sessions past their timeout and sessions idle for their
// idle timeout, but not busy ones; a timeout can be extended up to the
// maximum lifetime.
func TestReaper(t *testing.T) {
	clk := &clock{t: time.Now()}
	s := newStack(t, func(c *session.Config) {
		c.Now = clk.Now
		c.MaxLifetime = time.Hour
		c.ReapInterval = time.Hour // rounds are run by hand
	})
	ctx := ctxFor(t, 2*time.Minute)
	expiring := s.create(s.a, airlock.CreateSessionRequest{Image: "base", TimeoutS: 60, IdleTimeoutS: 3000})
	idle := s.create(s.a, airlock.CreateSessionRequest{Image: "base", TimeoutS: 3000, IdleTimeoutS: 30})
	busy := s.create(s.a, airlock.CreateSessionRequest{Image: "base", TimeoutS: 3000, IdleTimeoutS: 30})
	extended := s.create(s.a, airlock.CreateSessionRequest{Image: "base", TimeoutS: 60, IdleTimeoutS: 3000})

	// Extend: within the maximum lifetime only.
	if _, err := s.a.c.ExtendSession(ctx, extended.ID, 7200); err == nil {
		t.Fatal("extended past the maximum lifetime")
	}
	ext, err := s.a.c.ExtendSession(ctx, extended.ID, 600)
	if err != nil || ext.ExpiresAt.Sub(clk.Now()).Round(time.Second) != 600*time.Second || ext.Limits.TimeoutS < 600 {
		t.Fatalf("extend: %+v %v", ext, err)
	}

	// A long command keeps "busy" busy through its idle timeout.
	done := make(chan error, 1)
	go func() {
		_, err := s.a.c.Exec(ctx, busy.ID, airlock.SessionExecRequest{Shell: "sleep 3"})
		done <- err
	}()
	waitFor(t, 30*time.Second, "the session to be busy", func() bool {
		got, err := s.a.c.Session(ctx, busy.ID)
		return err == nil && got.State == airlock.SessionBusy
	})
	// Nothing is due yet.
	if n := s.mgr.Reap(ctx); n != 0 {
		t.Fatalf("reaped %d sessions early", n)
	}
	clk.Advance(45 * time.Second) // past the idle timeouts
	if n := s.mgr.Reap(ctx); n != 1 {
		t.Fatalf("idle round reaped %d, want 1", n)
	}
	clk.Advance(30 * time.Second) // past the 60 s timeout
	if n := s.mgr.Reap(ctx); n != 1 {
		t.Fatalf("timeout round reaped %d, want 1", n)
	}
	want := map[string][2]string{
		expiring.ID: {string(airlock.SessionDestroyed), airlock.EndTimeout},
		idle.ID:     {string(airlock.SessionDestroyed), airlock.EndIdle},
		busy.ID:     {string(airlock.SessionBusy), ""},
		extended.ID: {string(airlock.SessionReady), ""},
	}
	for id, w := range want {
		got, err := s.a.c.Session(ctx, id)
		if err != nil || string(got.State) != w[0] || got.EndReason != w[1] {
			t.Errorf("session %s: %s %q (%v), want %s %q", id, got.State, got.EndReason, err, w[0], w[1])
		}
	}
	if err := <-done; err != nil {
		t.Fatalf("the busy session's command: %v", err)
	}
	// Once its command is over, the busy one idles out like any other.
	clk.Advance(31 * time.Second)
	if n := s.mgr.Reap(ctx); n != 1 {
		t.Fatalf("reaped %d after the command ended, want 1", n)
	}
	if got, _ := s.a.c.Session(ctx, busy.ID); got.EndReason != airlock.EndIdle {
		t.Fatalf("busy session: %+v", got)
	}
}

// The reaper runs by itself.
func TestReaperRunsOnItsOwn(t *testing.T) {
	s := newStack(t, func(c *session.Config) { c.ReapInterval = 100 * time.Millisecond })
	sess := s.create(s.a, airlock.CreateSessionRequest{Image: "base", TimeoutS: 600, IdleTimeoutS: 1})
	waitFor(t, 10*time.Second, "the reaper to end the idle session", func() bool {
		got, err := s.a.c.Session(ctxFor(t, time.Minute), sess.ID)
		return err == nil && got.State == airlock.SessionDestroyed && got.EndReason == airlock.EndIdle
	})
	s.checkClean()
}

// A restarted server takes back the sessions the previous run left: the
// same ID, files, interpreter state and deadline, and a program that was
// running adopted with its whole output; a session whose sandbox died
// while no server ran is ended with the reason, one still being made
// fails and frees its idempotency key, and a deleted one is not touched.
// The first server lets go as a clean stop that keeps sessions does
// (Detach); the e2e tests kill a real airlockd with SIGKILL.
func TestRestartReattachesSessions(t *testing.T) {
	testenv.RequireRoot(t)
	testenv.RequireRunsc(t)
	dir, err := os.MkdirTemp("", "airlock-restart-")
	if err != nil {
		t.Fatal(err)
	}
	parent := "airlock-test-" + testenv.RandomID()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	newBackend := func() *gvisor.Backend {
		b, err := gvisor.New(gvisor.Config{StateDir: dir, CgroupParent: parent, Logger: logger})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	// Registered first, so it runs last: nothing of any sandbox is left.
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		b := newBackend()
		b.Reconcile(cctx)
		if err := b.CheckClean(cctx); err != nil {
			t.Errorf("host not clean: %v", err)
		}
		b.RemoveAll()
		os.RemoveAll(dir)
	})
	ctx := ctxFor(t, 4*time.Minute)
	db, err := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(t.TempDir(), "airlock.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })

	// The first run.
	first := newStackWith(t, teststack.Options{Backend: newBackend(), Store: db})
	a, c := first.a.tenant, first.a.c
	m1 := first.mgr
	sess := first.create(first.a, airlock.CreateSessionRequest{Image: "python-ds", TimeoutS: 3600})
	first.shell(first.a, sess.ID, "echo kept > state.txt")
	py, err := c.CreateContext(ctx, sess.ID, airlock.ContextPython)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.RunCell(ctx, sess.ID, py.ID, airlock.RunCellRequest{Code: "x = 41 + 1"}); err != nil {
		t.Fatal(err)
	}
	// A program that runs through the restart: it prints before and after.
	type result struct {
		e   *airlock.Execution
		err error
	}
	long := make(chan result, 1)
	go func() {
		e, err := m1.Exec(ctx, a, sess.ID, airlock.SessionExecRequest{
			Shell: "echo before; while [ ! -e /workspace/go ]; do sleep 0.05; done; echo after; exit 7", TimeoutSec: 120,
		}, nil)
		long <- result{e, err}
	}()
	waitFor(t, 30*time.Second, "the long program to run", func() bool {
		got, err := m1.Session(ctx, a, sess.ID)
		return err == nil && len(got.Running) == 1
	})
	dead := first.create(first.a, airlock.CreateSessionRequest{Image: "base"})
	gone := first.create(first.a, airlock.CreateSessionRequest{Image: "base"})
	if _, err := c.DeleteSession(ctx, gone.ID); err != nil {
		t.Fatal(err)
	}
	// A creation under way when the server went: its record and its key.
	making := &airlock.Session{TenantID: a.ID, Image: "base", Size: airlock.SizeSmall, IdempotencyKey: "k1", RequestHash: "h"}
	if err := db.CreateSession(ctx, making); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	if _, ok, err := db.ClaimIdempotencyKey(ctx, &airlock.IdempotencyKey{TenantID: a.ID, Key: "k1", RequestHash: "h", SessionID: making.ID, CreatedAt: now, ExpiresAt: now.Add(time.Hour)}); err != nil || !ok {
		t.Fatalf("claim: %v %v", ok, err)
	}

	// The first server lets go; the call it was serving ends, the program
	// goes on.
	if err := m1.Detach(ctx); err != nil {
		t.Fatal(err)
	}
	if r := <-long; airlock.ErrorCode(r.err) != airlock.EUNAVAILABLE || !strings.Contains(airlock.ErrorMessage(r.err), "restarting") {
		t.Fatalf("the exec running at the detach: %+v %v", r.e, r.err)
	}
	// One sandbox dies while no server runs.
	killSandbox(t, "ss-"+dead.ID)

	// The next start.
	second := newBareStack(t, teststack.Options{Backend: newBackend(), Store: db, NoRecover: true})
	m2 := second.mgr
	rep, err := m2.Recover(ctx)
	if err != nil {
		t.Fatalf("recover: %v", err)
	}
	if rep.Reattached != 1 || rep.Ended != 2 || rep.Adopted != 1 {
		t.Errorf("recovery: %+v, want 1 reattached, 2 ended (dead sandbox, creation), 1 adopted", rep)
	}
	if ids, err := second.Provisioner.Reconcile(ctx); err != nil || len(ids) != 1 || ids[0] != "ss-"+dead.ID {
		t.Errorf("the reconciler after recovery ended %v (%v), want only the dead session's sandbox", ids, err)
	}
	c2 := second.newClientFor(first.a)
	a2 := tenantClient{tenant: a, key: first.a.key, c: c2}
	got, err := c2.Session(ctx, sess.ID)
	if err != nil || got.State != airlock.SessionBusy || !got.ExpiresAt.Equal(sess.ExpiresAt) || got.Backend != "gvisor" {
		t.Fatalf("the session after the restart: %+v %v (created %+v)", got, err, sess)
	}
	if e := second.shell(a2, sess.ID, "cat state.txt"); e.Stdout != "kept\n" {
		t.Errorf("file after the restart: %+v", e)
	}
	ctxs, err := c2.ListContexts(ctx, sess.ID)
	if err != nil || len(ctxs) != 1 || ctxs[0].ID != py.ID {
		t.Fatalf("contexts after the restart: %+v %v", ctxs, err)
	}
	if r, err := c2.RunCell(ctx, sess.ID, py.ID, airlock.RunCellRequest{Code: "x"}); err != nil || r.Value != "42" {
		t.Errorf("interpreter state after the restart: %+v %v", r, err)
	}
	// The adopted program finishes, and its record has all of its output.
	second.shell(a2, sess.ID, "touch /workspace/go")
	waitFor(t, 30*time.Second, "the adopted program's record", func() bool {
		page, err := c2.ListExecutions(ctx, 0, "")
		if err != nil {
			return false
		}
		for _, e := range page.Executions {
			if e.Status == airlock.StatusCompleted && e.ExitCode == 7 {
				full, err := c2.Execution(ctx, e.ID) // a list leaves the output out
				if err != nil || full.Stdout != "before\nafter\n" || full.SessionID != sess.ID || full.Backend != "gvisor" {
					t.Errorf("adopted program: %+v %v", full, err)
				}
				return true
			}
		}
		return false
	})
	waitFor(t, 10*time.Second, "the session to be ready", func() bool {
		got, err := c2.Session(ctx, sess.ID)
		return err == nil && got.State == airlock.SessionReady
	})
	for _, id := range []string{dead.ID, making.ID} {
		got, err := c2.Session(ctx, id)
		if err != nil || got.State.Live() || got.EndReason != airlock.EndServerRestarted || got.EndDetail == "" {
			t.Errorf("session %s after the restart: %+v %v", id, got, err)
		}
	}
	if _, ok, _ := db.ClaimIdempotencyKey(ctx, &airlock.IdempotencyKey{TenantID: a.ID, Key: "k1", RequestHash: "h2", SessionID: "new", CreatedAt: now, ExpiresAt: now.Add(time.Hour)}); !ok {
		t.Error("the failed creation's idempotency key was not freed")
	}
	if got, _ := c2.Session(ctx, gone.ID); got.EndReason != airlock.EndDeleted {
		t.Errorf("an ended session was touched: %+v", got)
	}
	if rep, _ := m2.Recover(ctx); rep != (session.Recovery{}) {
		t.Errorf("a second recovery did %+v", rep)
	}
	// The ended session answers with a clear problem; new sessions work.
	_, err = c2.Exec(ctx, dead.ID, airlock.SessionExecRequest{Shell: "true"})
	wantProblem(t, "exec in the ended session", err, 409, "session-ended")
	second.create(a2, airlock.CreateSessionRequest{Image: "base"})
}

// killSandbox kills the runsc sandbox process of a sandbox, as if it died
// on its own.
func killSandbox(t *testing.T, id string) {
	t.Helper()
	entries, _ := os.ReadDir("/proc")
	killed := 0
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !strings.HasPrefix(string(b), "runsc-sandbox") {
			continue
		}
		if strings.HasSuffix(string(b), "\x00"+id+"\x00") {
			pid, _ := strconv.Atoi(e.Name())
			syscall.Kill(pid, syscall.SIGKILL)
			killed++
		}
	}
	if killed == 0 {
		t.Fatalf("no sandbox process of %s", id)
	}
}

// waitFor polls cond until it holds or the timeout passes.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	testreq.Eventually(t, timeout, what, cond)
}
