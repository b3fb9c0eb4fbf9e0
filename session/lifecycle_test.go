package session_test

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/gvisor"
	"github.com/airlockhq/airlock/internal/testenv"
	"github.com/airlockhq/airlock/session"
	"github.com/airlockhq/airlock/sqlite"
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
	for {
		got, _ := s.a.c.Session(ctx, busy.ID)
		if got.State == airlock.SessionBusy {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
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
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		got, err := s.a.c.Session(ctxFor(t, time.Minute), sess.ID)
		if err == nil && got.State == airlock.SessionDestroyed && got.EndReason == airlock.EndIdle {
			s.checkClean()
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatal("an idle session was not reaped")
}

// A restarted server ends the sessions the previous run left, cleanly,
// and records why; a session still being made fails and frees its
// idempotency key. The crash is simulated as it happens: the old run's
// store handle goes away with it, a new backend on the same state
// directory reconciles away the old sandboxes (whose agent channel died
// with the old process), then a new session manager recovers.
func TestRestartEndsSessions(t *testing.T) {
	testenv.RequireRoot(t)
	testenv.RequireRunsc(t)
	images := testenv.Images(t)
	testenv.Image(t, "base")
	ctx := ctxFor(t, 2*time.Minute)
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
	var second *gvisor.Backend
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if second == nil {
			second = newBackend()
		}
		second.Reconcile(cctx)
		if err := second.CheckClean(cctx); err != nil {
			t.Errorf("host not clean: %v", err)
		}
		second.RemoveAll()
		os.RemoveAll(dir)
	})
	dbPath := filepath.Join(t.TempDir(), "airlock.db")
	db1, err := sqlite.Open(ctx, sqlite.Config{Path: dbPath})
	if err != nil {
		t.Fatal(err)
	}
	tenant := &airlock.Tenant{Name: "t"}
	if err := db1.CreateTenant(ctx, tenant); err != nil {
		t.Fatal(err)
	}

	// The first run.
	m1, err := session.New(session.Config{Backend: newBackend(), Images: images, Store: db1, Sessions: db1, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	live, _, err := m1.CreateSession(ctx, tenant, airlock.CreateSessionRequest{Image: "base"}, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m1.Exec(ctx, tenant, live.ID, airlock.SessionExecRequest{Shell: "echo work > w.txt"}, nil); err != nil {
		t.Fatal(err)
	}
	gone, _, err := m1.CreateSession(ctx, tenant, airlock.CreateSessionRequest{Image: "base"}, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m1.DeleteSession(ctx, tenant, gone.ID); err != nil {
		t.Fatal(err)
	}
	// A creation under way when the server died: its record and its key.
	making := &airlock.Session{TenantID: tenant.ID, Image: "base", Size: airlock.SizeSmall, IdempotencyKey: "k1", RequestHash: "h"}
	if err := db1.CreateSession(ctx, making); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	if _, ok, err := db1.ClaimIdempotencyKey(ctx, &airlock.IdempotencyKey{TenantID: tenant.ID, Key: "k1", RequestHash: "h", SessionID: making.ID, CreatedAt: now, ExpiresAt: now.Add(time.Hour)}); err != nil || !ok {
		t.Fatalf("claim: %v %v", ok, err)
	}

	// The crash, and the next start.
	db1.Close()
	defer m1.Close(context.Background()) // its writes fail: its store is gone
	second = newBackend()
	ids, err := second.Reconcile(ctx)
	if err != nil || len(ids) != 1 {
		t.Fatalf("reconcile ended %v, %v", ids, err)
	}
	db2, err := sqlite.Open(ctx, sqlite.Config{Path: dbPath})
	if err != nil {
		t.Fatal(err)
	}
	defer db2.Close()
	m2, err := session.New(session.Config{Backend: second, Images: images, Store: db2, Sessions: db2, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	defer m2.Close(context.Background())
	n, err := m2.Recover(ctx)
	if err != nil || n != 2 {
		t.Fatalf("recover: %d %v", n, err)
	}
	got, err := m2.Session(ctx, tenant, live.ID)
	if err != nil || got.State != airlock.SessionDestroyed || got.EndReason != airlock.EndServerRestarted || got.EndedAt == nil || got.EndDetail == "" {
		t.Fatalf("live session after the restart: %+v %v", got, err)
	}
	got, err = m2.Session(ctx, tenant, making.ID)
	if err != nil || got.State != airlock.SessionFailed || got.EndReason != airlock.EndServerRestarted {
		t.Fatalf("session being made at the crash: %+v %v", got, err)
	}
	if _, ok, _ := db2.ClaimIdempotencyKey(ctx, &airlock.IdempotencyKey{TenantID: tenant.ID, Key: "k1", RequestHash: "h2", SessionID: "new", CreatedAt: now, ExpiresAt: now.Add(time.Hour)}); !ok {
		t.Fatal("the failed creation's idempotency key was not freed")
	}
	if got, _ := m2.Session(ctx, tenant, gone.ID); got.EndReason != airlock.EndDeleted {
		t.Fatalf("an ended session was touched: %+v", got)
	}
	if n, _ := m2.Recover(ctx); n != 0 {
		t.Fatalf("a second recovery ended %d", n)
	}
	// The new server answers for the ended session with a clear problem.
	_, err = m2.Exec(ctx, tenant, live.ID, airlock.SessionExecRequest{Shell: "cat w.txt"}, nil)
	if airlock.ErrorCode(err) != airlock.ECONFLICT || !strings.Contains(airlock.ErrorMessage(err), "server_restarted") {
		t.Fatalf("exec after the restart: %v", err)
	}
	// And makes new sessions as usual.
	fresh, created, err := m2.CreateSession(ctx, tenant, airlock.CreateSessionRequest{Image: "base"}, "")
	if err != nil || !created || fresh.State != airlock.SessionReady {
		t.Fatalf("new session after the restart: %+v %v", fresh, err)
	}
}
