package quota_test

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/service/quota"
	"github.com/airlockhq/airlock/store/sqlite"
)

// clock is a settable clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func newClock() *clock { return &clock{t: time.Date(2026, 3, 4, 12, 0, 0, 0, time.UTC)} }

func newLedger(t *testing.T, c *clock, defaults quota.Limits, store airlock.QuotaStore) *quota.Ledger {
	t.Helper()
	l, err := quota.New(quota.Config{Defaults: defaults, Store: store, Now: c.Now, FlushInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// wantRefusal checks a refusal's code, type, members and Retry-After.
func wantRefusal(t *testing.T, what string, err error, k quota.Key, limit, used int64, retry time.Duration) {
	t.Helper()
	var e *airlock.Error
	if !errors.As(err, &e) {
		t.Fatalf("%s: %v, want a refusal by %s", what, err, k)
	}
	if e.Code != airlock.ERATELIMITED || e.Type != k.Problem() {
		t.Errorf("%s: code %s type %s, want %s %s", what, e.Code, e.Type, airlock.ERATELIMITED, k.Problem())
	}
	if quota.RefusalOf(err) != k || e.Extensions["limit"] != limit || e.Extensions["used"] != used || e.Extensions["unit"] != k.Unit() {
		t.Errorf("%s: members %v, want quota %s limit %d used %d", what, e.Extensions, k, limit, used)
	}
	if retry > 0 && e.RetryAfter != retry {
		t.Errorf("%s: Retry-After %s, want %s", what, e.RetryAfter, retry)
	}
	if e.RetryAfter < time.Second {
		t.Errorf("%s: Retry-After %s, want at least 1s", what, e.RetryAfter)
	}
}

func used(u *airlock.Usage, k quota.Key) airlock.QuotaUsage {
	for _, q := range u.Quotas {
		if q.Quota == string(k) {
			return q
		}
	}
	return airlock.QuotaUsage{}
}

func TestConcurrentQuotas(t *testing.T) {
	c := newClock()
	l := newLedger(t, c, quota.Limits{quota.Sessions: 2, quota.Runs: 1, quota.VCPU: 3000, quota.Memory: 3 << 30}, nil)
	sess := quota.Claim{Kind: quota.Session, CPUs: 1, MemoryBytes: 1 << 30, Deadline: c.Now().Add(5 * time.Minute)}
	a, err := l.Admit("a", sess)
	if err != nil {
		t.Fatal(err)
	}
	sess.Deadline = c.Now().Add(2 * time.Minute)
	b, err := l.Admit("a", sess)
	if err != nil {
		t.Fatal(err)
	}
	_, err = l.Admit("a", sess)
	// The soonest session deadline is 2 minutes away.
	wantRefusal(t, "third session", err, quota.Sessions, 2, 2, 2*time.Minute)
	// Another tenant is not affected.
	if h, err := l.Admit("other", sess); err != nil {
		t.Errorf("another tenant's session: %v", err)
	} else {
		h.Release()
	}

	run := quota.Claim{Kind: quota.Run, CPUs: 1, MemoryBytes: 512 << 20, Deadline: c.Now().Add(30 * time.Second)}
	r, err := l.Admit("a", run)
	if err != nil {
		t.Fatal(err)
	}
	_, err = l.Admit("a", run)
	wantRefusal(t, "second run", err, quota.Runs, 1, 1, 30*time.Second)
	r.Start()
	c.Add(4 * time.Second)
	r.Release() // the tenant's runs now take about 4 s

	// vCPU: 2 of 3 in use, a 2-vCPU session does not fit.
	_, err = l.Admit("a", quota.Claim{Kind: quota.Run, CPUs: 2})
	wantRefusal(t, "2 more vCPU", err, quota.VCPU, 3000, 2000, 0)
	var e *airlock.Error
	errors.As(err, &e)
	if e.Extensions["requested"] != int64(2000) {
		t.Errorf("requested %v, want 2000", e.Extensions["requested"])
	}
	_, err = l.Admit("a", quota.Claim{Kind: quota.Run, CPUs: 0.5, MemoryBytes: 2 << 30})
	wantRefusal(t, "2 GiB more", err, quota.Memory, 3<<30, 2<<30, 0)

	// A run's Retry-After is its tenant's recent run time once known.
	r, err = l.Admit("a", run)
	if err != nil {
		t.Fatal(err)
	}
	_, err = l.Admit("a", run)
	wantRefusal(t, "run with history", err, quota.Runs, 1, 1, 4*time.Second)
	r.Release()
	r.Release() // twice is once

	a.Release()
	b.Release()
	u := l.UsageOf("a")
	for _, k := range []quota.Key{quota.Sessions, quota.Runs, quota.VCPU, quota.Memory} {
		if q := used(u, k); q.Used != 0 || q.Remaining != q.Limit {
			t.Errorf("after release, %s: %+v", k, q)
		}
	}
	// Force admits over the limit (a session taken back after a restart).
	for range 3 {
		if _, err := l.Admit("a", quota.Claim{Kind: quota.Session, Force: true}); err != nil {
			t.Fatal(err)
		}
	}
	if q := used(l.UsageOf("a"), quota.Sessions); q.Used != 3 || q.Remaining != 0 {
		t.Errorf("forced: %+v", q)
	}
}

func TestExecutionsPerMinute(t *testing.T) {
	c := newClock()
	l := newLedger(t, c, quota.Limits{quota.ExecutionsPerMinute: 3}, nil)
	r, err := l.Admit("a", quota.Claim{Kind: quota.Run})
	if err != nil {
		t.Fatal(err)
	}
	r.Start()
	r.Release()
	c.Add(10 * time.Second)
	for range 2 {
		if err := l.Exec("a"); err != nil {
			t.Fatal(err)
		}
		c.Add(5 * time.Second)
	}
	// Three in the window: the oldest (20 s ago) leaves it in 40 s.
	err = l.Exec("a")
	wantRefusal(t, "fourth exec", err, quota.ExecutionsPerMinute, 3, 3, 40*time.Second)
	_, err = l.Admit("a", quota.Claim{Kind: quota.Run})
	wantRefusal(t, "a run", err, quota.ExecutionsPerMinute, 3, 3, 40*time.Second)
	if err := l.Exec("b"); err != nil {
		t.Errorf("another tenant: %v", err)
	}
	c.Add(40 * time.Second)
	if err := l.Exec("a"); err != nil {
		t.Fatalf("after the window moved: %v", err)
	}
	// A run admitted but never started gives its place back.
	c.Add(time.Hour)
	for range 3 {
		h, err := l.Admit("a", quota.Claim{Kind: quota.Run})
		if err != nil {
			t.Fatal(err)
		}
		h.Release()
	}
	if q := used(l.UsageOf("a"), quota.ExecutionsPerMinute); q.Used != 0 {
		t.Errorf("runs that never started count: %+v", q)
	}
}

func TestSandboxSecondsPerDay(t *testing.T) {
	c := newClock()
	c.t = time.Date(2026, 3, 4, 23, 59, 0, 0, time.UTC)
	l := newLedger(t, c, quota.Limits{quota.SandboxSecondsPerDay: 100}, nil)
	h, err := l.Admit("a", quota.Claim{Kind: quota.Session})
	if err != nil {
		t.Fatal(err)
	}
	// Not started (being made): no time counts.
	c.Add(10 * time.Second)
	if q := used(l.UsageOf("a"), quota.SandboxSecondsPerDay); q.Used != 0 {
		t.Errorf("before start: %+v", q)
	}
	h.Start()
	c.Add(40 * time.Second) // 23:59:50
	q := used(l.UsageOf("a"), quota.SandboxSecondsPerDay)
	if q.Used != 40 || q.Remaining != 60 || q.ResetsAt == nil || !q.ResetsAt.Equal(time.Date(2026, 3, 5, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("live session: %+v", q)
	}
	// Two sandboxes make the time go twice as fast.
	h2, err := l.Admit("a", quota.Claim{Kind: quota.Run})
	if err != nil {
		t.Fatal(err)
	}
	h2.Start()
	c.Add(5 * time.Second)
	h2.Release()
	if q := used(l.UsageOf("a"), quota.SandboxSecondsPerDay); q.Used != 50 {
		t.Errorf("with a run: %+v", q)
	}
	// Over midnight: the new day counts from 00:00.
	c.Add(15 * time.Second) // 00:00:10
	if q := used(l.UsageOf("a"), quota.SandboxSecondsPerDay); q.Used != 10 {
		t.Errorf("after midnight: %+v", q)
	}
	c.Add(90 * time.Second) // 00:01:40: 100 s today
	_, err = l.Admit("a", quota.Claim{Kind: quota.Run})
	midnight := time.Date(2026, 3, 6, 0, 0, 0, 0, time.UTC)
	wantRefusal(t, "day used up", err, quota.SandboxSecondsPerDay, 100, 100, midnight.Sub(c.Now()))
	if err := l.Exec("a"); err != nil {
		t.Errorf("a session exec is not refused by the day's time: %v", err)
	}
	h.Release()
}

func TestEgressBytesPerDay(t *testing.T) {
	c := newClock()
	l := newLedger(t, c, quota.Limits{quota.EgressBytesPerDay: 1000}, nil)
	if got := l.ChargeEgress("a", 0); got != 1000 {
		t.Errorf("remaining %d, want 1000", got)
	}
	if got := l.ChargeEgress("a", 600); got != 400 {
		t.Errorf("remaining %d, want 400", got)
	}
	if got := l.ChargeEgress("a", 500); got != -100 {
		t.Errorf("remaining %d, want -100", got)
	}
	// A sandbox with a network is refused; one without is not.
	_, err := l.Admit("a", quota.Claim{Kind: quota.Session, Network: true})
	wantRefusal(t, "network", err, quota.EgressBytesPerDay, 1000, 1100, 12*time.Hour)
	if h, err := l.Admit("a", quota.Claim{Kind: quota.Session}); err != nil {
		t.Errorf("without a network: %v", err)
	} else {
		h.Release()
	}
	if got := l.ChargeEgress("b", 10); got != 990 {
		t.Errorf("another tenant: remaining %d", got)
	}
	c.Add(12 * time.Hour)
	if got := l.ChargeEgress("a", 0); got != 1000 {
		t.Errorf("next day: remaining %d, want 1000", got)
	}
	unl := newLedger(t, c, nil, nil)
	if got := unl.ChargeEgress("a", 1<<40); got <= 0 {
		t.Errorf("no limit: remaining %d", got)
	}
}

func openStore(t *testing.T, path string, c *clock) *sqlite.DB {
	t.Helper()
	db, err := sqlite.Open(context.Background(), sqlite.Config{Path: path, Now: c.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// The day's counters and the overrides come back after a restart; what
// was counted since the last write is what a crash loses.
func TestRestart(t *testing.T) {
	ctx := context.Background()
	c := newClock()
	path := filepath.Join(t.TempDir(), "airlock.db")
	db := openStore(t, path, c)
	tn := &airlock.Tenant{Name: "acme"}
	if err := db.CreateTenant(ctx, tn); err != nil {
		t.Fatal(err)
	}
	if err := db.SetTenantQuota(ctx, tn.ID, string(quota.SandboxSecondsPerDay), 60); err != nil {
		t.Fatal(err)
	}
	l := newLedger(t, c, quota.Limits{quota.SandboxSecondsPerDay: 3600, quota.EgressBytesPerDay: 1 << 20}, db)
	if err := l.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if q := used(l.UsageOf(tn.ID), quota.SandboxSecondsPerDay); q.Limit != 60 || q.Source != "tenant" {
		t.Errorf("override: %+v", q)
	}
	h, err := l.Admit(tn.ID, quota.Claim{Kind: quota.Session})
	if err != nil {
		t.Fatal(err)
	}
	h.Start()
	c.Add(20 * time.Second)
	l.ChargeEgress(tn.ID, 1000)
	if err := l.Flush(ctx); err != nil { // a long session is written while it lives
		t.Fatal(err)
	}
	c.Add(5 * time.Second) // not written: a crash loses these 5 s
	got, err := db.DailyUsage(ctx, quota.Day(c.Now()))
	if err != nil {
		t.Fatal(err)
	}
	if got[tn.ID] != (airlock.DailyUsage{SandboxMillis: 20000, EgressBytes: 1000}) {
		t.Errorf("stored %+v", got[tn.ID])
	}

	// "Crash": a new ledger on the same store, the old one dropped.
	l2 := newLedger(t, c, quota.Limits{quota.SandboxSecondsPerDay: 3600, quota.EgressBytesPerDay: 1 << 20}, db)
	if err := l2.Start(ctx); err != nil {
		t.Fatal(err)
	}
	u := l2.UsageOf(tn.ID)
	if q := used(u, quota.SandboxSecondsPerDay); q.Used != 20 || q.Limit != 60 {
		t.Errorf("after restart: %+v", q)
	}
	if q := used(u, quota.EgressBytesPerDay); q.Used != 1000 {
		t.Errorf("egress after restart: %+v", q)
	}
	// Taken back (forced), it counts from the restart on.
	h2, err := l2.Admit(tn.ID, quota.Claim{Kind: quota.Session, Force: true})
	if err != nil {
		t.Fatal(err)
	}
	h2.Start()
	c.Add(40 * time.Second)
	_, err = l2.Admit(tn.ID, quota.Claim{Kind: quota.Run})
	wantRefusal(t, "after restart", err, quota.SandboxSecondsPerDay, 60, 60, 0)
	h2.Release()
	if err := l2.Close(ctx); err != nil {
		t.Fatal(err)
	}
	got, _ = db.DailyUsage(ctx, quota.Day(c.Now()))
	if got[tn.ID].SandboxMillis != 60000 {
		t.Errorf("after close: %+v", got[tn.ID])
	}

	// Dropping the override brings the default back.
	if err := db.DeleteTenantQuota(ctx, tn.ID, string(quota.SandboxSecondsPerDay)); err != nil {
		t.Fatal(err)
	}
	if err := l2.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	if q := used(l2.UsageOf(tn.ID), quota.SandboxSecondsPerDay); q.Limit != 3600 || q.Source != "default" {
		t.Errorf("override dropped: %+v", q)
	}
}

// failingStore fails its writes while fail is set.
type failingStore struct {
	airlock.QuotaStore
	mu    sync.Mutex
	fail  bool
	added []airlock.UsageDelta
}

func (s *failingStore) AddUsage(ctx context.Context, d []airlock.UsageDelta) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail {
		return errors.New("disk full")
	}
	s.added = append(s.added, d...)
	return nil
}

func (s *failingStore) TenantQuotas(context.Context) (map[string]map[string]int64, error) {
	return nil, nil
}

func (s *failingStore) DailyUsage(context.Context, string) (map[string]airlock.DailyUsage, error) {
	return nil, nil
}

func TestFlushFailureKeepsCounts(t *testing.T) {
	ctx := context.Background()
	c := newClock()
	st := &failingStore{fail: true}
	l := newLedger(t, c, nil, st)
	l.ChargeEgress("a", 100)
	if err := l.Flush(ctx); err == nil {
		t.Fatal("flush to a failing store succeeded")
	}
	if q := used(l.UsageOf("a"), quota.EgressBytesPerDay); q.Used != 100 {
		t.Errorf("after a failed write: %+v", q)
	}
	st.fail = false
	l.ChargeEgress("a", 50)
	if err := l.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if len(st.added) != 1 || st.added[0].EgressBytes != 150 {
		t.Errorf("written %+v, want one delta of 150 bytes", st.added)
	}
	if err := l.Flush(ctx); err != nil || len(st.added) != 1 {
		t.Errorf("nothing new, yet written again: %+v %v", st.added, err)
	}
}

// The ledger is safe for concurrent use, and its counts add up.
func TestConcurrent(t *testing.T) {
	c := newClock()
	l := newLedger(t, c, quota.Limits{quota.Runs: 4}, nil)
	var wg sync.WaitGroup
	var mu sync.Mutex
	admitted, peak, cur := 0, 0, 0
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 200 {
				h, err := l.Admit("a", quota.Claim{Kind: quota.Run, CPUs: 1})
				if err != nil {
					if quota.RefusalOf(err) != quota.Runs {
						t.Error(err)
					}
					continue
				}
				mu.Lock()
				admitted++
				cur++
				peak = max(peak, cur)
				mu.Unlock()
				h.Start()
				l.ChargeEgress("a", 1)
				mu.Lock()
				cur--
				mu.Unlock()
				h.Release()
			}
		}()
	}
	wg.Wait()
	u := l.UsageOf("a")
	if q := used(u, quota.Runs); q.Used != 0 || peak > 4 || admitted == 0 {
		t.Errorf("runs %+v, peak %d, admitted %d", q, peak, admitted)
	}
	if q := used(u, quota.EgressBytesPerDay); q.Used != int64(admitted) {
		t.Errorf("egress %d, want %d", q.Used, admitted)
	}
}

func TestRefusalMetric(t *testing.T) {
	reg := prometheus.NewRegistry()
	l, err := quota.New(quota.Config{Defaults: quota.Limits{quota.Runs: 0, quota.ExecutionsPerMinute: 0}, Metrics: reg})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		l.Admit("a", quota.Claim{Kind: quota.Run})
	}
	l.Exec("a")
	out := map[string]float64{}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			out[m.GetLabel()[0].GetValue()] = m.GetCounter().GetValue()
		}
	}
	if out["runs"] != 2 || out["executions_per_minute"] != 1 || out["memory"] != 0 || len(out) != len(quota.Keys()) {
		t.Errorf("refusals %v", out)
	}
}
