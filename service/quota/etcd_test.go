package quota_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/etcdtest"
	"github.com/airlockhq/airlock/internal/problem"
	"github.com/airlockhq/airlock/internal/testenv/testreq"
	"github.com/airlockhq/airlock/service/quota"
)

// fleetNode is one node's ledger on the shared counters.
type fleetNode struct {
	ledger   *quota.Ledger
	counters *quota.EtcdCounters
	cli      *clientv3.Client
}

// startNode starts a ledger whose counters are in etcd, reached through
// cli, as node id.
func startNode(t testing.TB, cli *clientv3.Client, id string, now func() time.Time, defaults quota.Limits) *fleetNode {
	t.Helper()
	return startNodeTTL(t, cli, id, now, defaults, 2*time.Second)
}

// startNodeTTL is startNode with a lease TTL.
func startNodeTTL(t testing.TB, cli *clientv3.Client, id string, now func() time.Time, defaults quota.Limits, ttl time.Duration) *fleetNode {
	t.Helper()
	c, err := quota.NewEtcdCounters(quota.EtcdConfig{Client: cli, NodeID: id, TTL: ttl, Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	l, err := quota.New(quota.Config{Defaults: defaults, Shared: c, Now: now, FlushInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	return &fleetNode{ledger: l, counters: c, cli: cli}
}

func startNodes(t testing.TB, etcd *etcdtest.Cluster, n int, now func() time.Time, defaults quota.Limits) []*fleetNode {
	var out []*fleetNode
	for i := 0; i < n; i++ {
		out = append(out, startNode(t, etcd.Client(t), "n"+string(rune('0'+i)), now, defaults))
	}
	return out
}

// wantUnavailable checks the problem of counters that cannot be
// reached.
func wantUnavailable(t *testing.T, what string, err error) {
	t.Helper()
	var e *airlock.Error
	if !errors.As(err, &e) || e.Code != airlock.EUNAVAILABLE || e.Type != "quota-unavailable" || e.RetryAfter < time.Second {
		t.Fatalf("%s: %v, want a 503 quota-unavailable problem with Retry-After", what, err)
	}
	if problem.Status(e.Code) != http.StatusServiceUnavailable {
		t.Errorf("%s: status %d, want 503", what, problem.Status(e.Code))
	}
}

// TestSharedConcurrentQuotas: a tenant at its session quota cannot go
// past it by spreading requests over three nodes at once, and a session
// ended on one node frees its place for another node.
func TestSharedConcurrentQuotas(t *testing.T) {
	etcd := etcdtest.Start(t, 1)
	nodes := startNodes(t, etcd, 3, time.Now, quota.Limits{quota.Sessions: 4, quota.VCPU: 10000})
	var mu sync.Mutex
	var holds []*quota.Hold
	var refused atomic.Int64
	var wg sync.WaitGroup
	for i := 0; i < 30; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h, err := nodes[i%3].ledger.Admit("a", quota.Claim{Kind: quota.Session, CPUs: 1, MemoryBytes: 1 << 20})
			if err != nil {
				if quota.RefusalOf(err) != quota.Sessions {
					t.Errorf("admit %d: %v, want a sessions refusal", i, err)
				}
				refused.Add(1)
				return
			}
			mu.Lock()
			holds = append(holds, h)
			mu.Unlock()
		}()
	}
	wg.Wait()
	if len(holds) != 4 || refused.Load() != 26 {
		t.Fatalf("30 sessions asked over 3 nodes with a quota of 4: %d admitted, %d refused", len(holds), refused.Load())
	}
	// Every node sees the whole fleet's use.
	for i, n := range nodes {
		if q := used(n.ledger.UsageOf("a"), quota.Sessions); q.Used != 4 || q.Remaining != 0 {
			t.Errorf("node %d: sessions %+v, want 4 used", i, q)
		}
		if q := used(n.ledger.UsageOf("a"), quota.VCPU); q.Used != 4000 {
			t.Errorf("node %d: vcpu %+v, want 4000 used", i, q)
		}
	}
	_, err := nodes[2].ledger.Admit("a", quota.Claim{Kind: quota.Session})
	wantRefusal(t, "a fifth session", err, quota.Sessions, 4, 4, 0)
	// Another tenant is not affected.
	if h, err := nodes[0].ledger.Admit("b", quota.Claim{Kind: quota.Session}); err != nil {
		t.Fatal(err)
	} else {
		h.Release()
	}
	// One ends: exactly one more fits, on any node.
	holds[0].Release()
	h, err := nodes[1].ledger.Admit("a", quota.Claim{Kind: quota.Session, CPUs: 1})
	if err != nil {
		t.Fatalf("after one ended: %v", err)
	}
	_, err = nodes[2].ledger.Admit("a", quota.Claim{Kind: quota.Session})
	wantRefusal(t, "past the quota again", err, quota.Sessions, 4, 4, 0)
	h.Release()
	for _, h := range holds[1:] {
		h.Release()
	}
	if q := used(nodes[0].ledger.UsageOf("a"), quota.Sessions); q.Used != 0 {
		t.Errorf("all ended: %d sessions used", q.Used)
	}
}

// TestSharedRate: the executions per minute (runs and session execs)
// are counted fleet-wide and leave the window after a minute.
func TestSharedRate(t *testing.T) {
	etcd := etcdtest.Start(t, 1)
	c := newClock()
	nodes := startNodes(t, etcd, 3, c.Now, quota.Limits{quota.ExecutionsPerMinute: 6})
	for i := 0; i < 3; i++ {
		if err := nodes[i].ledger.Exec("a"); err != nil {
			t.Fatal(err)
		}
		c.Add(time.Second)
	}
	var runs []*quota.Hold
	for i := 0; i < 3; i++ {
		h, err := nodes[i].ledger.Admit("a", quota.Claim{Kind: quota.Run})
		if err != nil {
			t.Fatal(err)
		}
		h.Start()
		runs = append(runs, h)
	}
	for i, n := range nodes {
		wantRefusal(t, "an exec past the rate", n.ledger.Exec("a"), quota.ExecutionsPerMinute, 6, 6, 57*time.Second)
		_, err := n.ledger.Admit("a", quota.Claim{Kind: quota.Run})
		wantRefusal(t, "a run past the rate", err, quota.ExecutionsPerMinute, 6, 6, 0)
		if q := used(n.ledger.UsageOf("a"), quota.ExecutionsPerMinute); q.Used != 6 {
			t.Errorf("node %d: executions %d, want 6", i, q.Used)
		}
	}
	for _, h := range runs {
		h.Release() // started: they ran, and stay in the window
	}
	if err := nodes[0].ledger.Exec("a"); quota.RefusalOf(err) != quota.ExecutionsPerMinute {
		t.Fatalf("after runs that ran ended: %v, want still refused", err)
	}
	// A run admitted and never started gives its place back.
	c.Add(57 * time.Second) // the first exec leaves the window
	h, err := nodes[1].ledger.Admit("a", quota.Claim{Kind: quota.Run})
	if err != nil {
		t.Fatal(err)
	}
	if err := nodes[2].ledger.Exec("a"); quota.RefusalOf(err) != quota.ExecutionsPerMinute {
		t.Fatalf("window full again: %v", err)
	}
	h.Release()
	if err := nodes[2].ledger.Exec("a"); err != nil {
		t.Fatalf("a run that never ran gave its place back: %v", err)
	}
	c.Add(time.Minute)
	for i, n := range nodes {
		if err := n.ledger.Exec("a"); err != nil {
			t.Errorf("node %d a minute later: %v", i, err)
		}
	}
}

// TestSharedNodeLoss: the holds of a node that stops (killed: its lease
// is no longer renewed) stop counting within the lease TTL; a node that
// starts again under the same ID drops its earlier holds at once.
func TestSharedNodeLoss(t *testing.T) {
	etcd := etcdtest.Start(t, 1)
	limits := quota.Limits{quota.Sessions: 2}
	a := startNode(t, etcd.Client(t), "a", time.Now, limits)
	b := startNode(t, etcd.Client(t), "b", time.Now, limits)
	if _, err := b.ledger.Admit("t", quota.Claim{Kind: quota.Session}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.ledger.Admit("t", quota.Claim{Kind: quota.Session}); err != nil {
		t.Fatal(err)
	}
	_, err := a.ledger.Admit("t", quota.Claim{Kind: quota.Session})
	wantRefusal(t, "while b holds two", err, quota.Sessions, 2, 2, 0)

	// b starts again (same ID, its lease still alive): its earlier holds
	// go at its start, before the lease would take them.
	startNode(t, etcd.Client(t), "b", time.Now, limits)
	h, err := a.ledger.Admit("t", quota.Claim{Kind: quota.Session})
	if err != nil {
		t.Fatalf("after b's restart: %v", err)
	}
	h.Release()

	// c holds one and dies (its client closed: no renewal, no revoke).
	cli := etcd.Client(t)
	c := startNode(t, cli, "c", time.Now, limits)
	if _, err := c.ledger.Admit("t", quota.Claim{Kind: quota.Session}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ledger.Admit("t", quota.Claim{Kind: quota.Session}); err != nil {
		t.Fatal(err)
	}
	c.counters.Close()
	cli.Close()
	died := time.Now()
	_, err = a.ledger.Admit("t", quota.Claim{Kind: quota.Session})
	wantRefusal(t, "while c's lease lives", err, quota.Sessions, 2, 2, 0)
	testreq.Eventually(t, 10*time.Second, "c's holds gone with its lease", func() bool {
		h, err := a.ledger.Admit("t", quota.Claim{Kind: quota.Session})
		if err == nil {
			h.Release()
		}
		return err == nil
	})
	t.Logf("a dead node's holds stopped counting %v after it died (lease TTL 2s)", time.Since(died).Round(10*time.Millisecond))
}

// TestSharedPartition: a node cut off from etcd refuses new work with a
// 503 and Retry-After, and records nothing; the rest of the fleet goes
// on counting its holds until its lease expires; when it is back it
// writes its live holds again, so they count again.
func TestSharedPartition(t *testing.T) {
	etcd := etcdtest.Start(t, 1)
	limits := quota.Limits{quota.Sessions: 3, quota.ExecutionsPerMinute: 100}
	a := startNode(t, etcd.Client(t), "a", time.Now, limits)
	p := newCutProxy(t, strings.TrimPrefix(etcd.Endpoints()[0], "http://"))
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{"http://" + p.addr()}, DialTimeout: time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	b := startNodeTTL(t, cli, "b", time.Now, limits, 8*time.Second)
	kept, err := b.ledger.Admit("t", quota.Claim{Kind: quota.Session})
	if err != nil {
		t.Fatal(err)
	}

	p.cut()
	// The others count b's session while its lease lives: two more, no
	// third.
	var others []*quota.Hold
	for i := 0; i < 2; i++ {
		h, err := a.ledger.Admit("t", quota.Claim{Kind: quota.Session})
		if err != nil {
			t.Fatalf("session %d on a: %v", i, err)
		}
		others = append(others, h)
	}
	_, err = a.ledger.Admit("t", quota.Claim{Kind: quota.Session})
	wantRefusal(t, "with b's session counted", err, quota.Sessions, 3, 3, 0)
	others[0].Release()

	began := time.Now()
	_, err = b.ledger.Admit("t", quota.Claim{Kind: quota.Session})
	wantUnavailable(t, "a session on the cut-off node", err)
	if took := time.Since(began); took > 4*time.Second {
		t.Errorf("the refusal took %v", took)
	}
	wantUnavailable(t, "an exec on the cut-off node", b.ledger.Exec("t"))
	if _, err := b.ledger.Usage(context.Background(), &airlock.Tenant{ID: "t"}); err == nil {
		t.Errorf("usage on the cut-off node answered from its own memory")
	}

	// Past the lease TTL b's hold is gone from the counters.
	testreq.Eventually(t, 20*time.Second, "b's hold gone with its lease", func() bool {
		return used(a.ledger.UsageOf("t"), quota.Sessions).Used == 1
	})
	// Back: b gets a lease, writes its live session again, and admits.
	p.restore()
	testreq.Eventually(t, 15*time.Second, "b's session counted again", func() bool {
		return used(a.ledger.UsageOf("t"), quota.Sessions).Used == 2
	})
	testreq.Eventually(t, 10*time.Second, "b admits again", func() bool {
		h, err := b.ledger.Admit("t", quota.Claim{Kind: quota.Session})
		if err == nil {
			h.Release()
		}
		return err == nil
	})
	kept.Release()
	others[1].Release()
	if q := used(a.ledger.UsageOf("t"), quota.Sessions); q.Used != 0 {
		t.Errorf("all ended: %d sessions used", q.Used)
	}
}

// TestSharedForcedWhileCut: a session taken back at a start is recorded
// even when etcd cannot be reached then, and written once it can.
func TestSharedForcedWhileCut(t *testing.T) {
	etcd := etcdtest.Start(t, 1)
	limits := quota.Limits{quota.Sessions: 1}
	a := startNode(t, etcd.Client(t), "a", time.Now, limits)
	p := newCutProxy(t, strings.TrimPrefix(etcd.Endpoints()[0], "http://"))
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{"http://" + p.addr()}, DialTimeout: time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	b := startNode(t, cli, "b", time.Now, limits)
	p.cut()
	h, err := b.ledger.Admit("t", quota.Claim{Kind: quota.Session, Force: true})
	if err != nil {
		t.Fatalf("a forced claim while cut off: %v", err)
	}
	defer h.Release()
	p.restore()
	testreq.Eventually(t, 15*time.Second, "the forced hold written", func() bool {
		return used(a.ledger.UsageOf("t"), quota.Sessions).Used == 1
	})
}

// BenchmarkSharedAdmit measures what the fleet's counters add to every
// run's path: one Admit and its Release (a run's hold and its place in
// the minute's window), and one session exec, on a three-member etcd.
func BenchmarkSharedAdmit(b *testing.B) {
	etcd := etcdtest.Start(b, 3)
	n := startNode(b, etcd.Client(b), "n0", time.Now, quota.Limits{quota.Runs: 1000, quota.ExecutionsPerMinute: quota.Unlimited, quota.VCPU: 1 << 40})
	b.Run("admit+release", func(b *testing.B) {
		var lat []time.Duration
		for i := 0; i < b.N; i++ {
			t0 := time.Now()
			h, err := n.ledger.Admit("bench", quota.Claim{Kind: quota.Run, CPUs: 1})
			if err != nil {
				b.Fatal(err)
			}
			h.Start()
			h.Release()
			lat = append(lat, time.Since(t0))
		}
		report(b, lat)
	})
	b.Run("exec", func(b *testing.B) {
		var lat []time.Duration
		for i := 0; i < b.N; i++ {
			t0 := time.Now()
			if err := n.ledger.Exec("bench-exec"); err != nil {
				b.Fatal(err)
			}
			lat = append(lat, time.Since(t0))
		}
		report(b, lat)
	})
}

func report(b *testing.B, lat []time.Duration) {
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	if len(lat) == 0 {
		return
	}
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
}

// cutProxy is a loopback TCP proxy to one address; cut drops its
// connections and refuses new ones until restore.
type cutProxy struct {
	ln    net.Listener
	to    string
	mu    sync.Mutex
	conns map[net.Conn]bool
	isCut bool
}

func newCutProxy(t *testing.T, to string) *cutProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{ln: ln, to: to, conns: map[net.Conn]bool{}}
	go p.serve()
	t.Cleanup(func() { ln.Close(); p.cut() })
	return p
}

func (p *cutProxy) addr() string { return p.ln.Addr().String() }

func (p *cutProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		go func() {
			u, err := net.DialTimeout("tcp", p.to, time.Second)
			if err != nil {
				c.Close()
				return
			}
			p.mu.Lock()
			if p.isCut {
				p.mu.Unlock()
				c.Close()
				u.Close()
				return
			}
			p.conns[c], p.conns[u] = true, true
			p.mu.Unlock()
			go func() { io.Copy(u, c); u.Close() }()
			io.Copy(c, u)
			c.Close()
		}()
	}
}

func (p *cutProxy) cut() {
	p.mu.Lock()
	p.isCut = true
	conns := p.conns
	p.conns = map[net.Conn]bool{}
	p.mu.Unlock()
	for c := range conns {
		c.Close()
	}
}

func (p *cutProxy) restore() {
	p.mu.Lock()
	p.isCut = false
	p.mu.Unlock()
}
