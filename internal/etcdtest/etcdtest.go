// Package etcdtest starts a real etcd cluster inside a test process: n
// members from go.etcd.io/etcd/server/v3/embed on loopback ports chosen
// at random, each with a temporary data directory, all stopped and
// removed when the test ends. It owns nothing else: no binaries, no
// addresses beyond 127.0.0.1.
package etcdtest

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"

	"github.com/airlockhq/airlock/internal/testenv/testport"
	"github.com/airlockhq/airlock/internal/testenv/testreq"
)

// Cluster is a running etcd cluster.
type Cluster struct {
	t       testing.TB
	mu      sync.Mutex
	members []*member
}

type member struct {
	name    string
	client  string // http://127.0.0.1:port
	peer    string
	dir     string
	etcd    *embed.Etcd // nil once stopped
	initial string
}

// Start starts an n-member cluster and waits until it has a leader.
func Start(t testing.TB, n int) *Cluster {
	t.Helper()
	c := &Cluster{t: t}
	var initial []string
	addrs := freeAddrs(t, 2*n)
	for i := 0; i < n; i++ {
		m := &member{name: fmt.Sprintf("m%d", i), client: "http://" + addrs[2*i], peer: "http://" + addrs[2*i+1], dir: t.TempDir()}
		c.members = append(c.members, m)
		initial = append(initial, m.name+"="+m.peer)
	}
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i, m := range c.members {
		m.initial = strings.Join(initial, ",")
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = c.start(m, embed.ClusterStateFlagNew)
		}()
	}
	wg.Wait()
	t.Cleanup(c.Close)
	for _, err := range errs {
		if err != nil {
			t.Fatalf("etcdtest: %v", err)
		}
	}
	c.WaitLeader(t, 30*time.Second)
	return c
}

func (c *Cluster) start(m *member, state string) error {
	cfg := embed.NewConfig()
	cfg.Name = m.name
	cfg.Dir = m.dir
	cu, _ := url.Parse(m.client)
	pu, _ := url.Parse(m.peer)
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{*cu}, []url.URL{*cu}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{*pu}, []url.URL{*pu}
	cfg.InitialCluster = m.initial
	cfg.ClusterState = state
	cfg.InitialClusterToken = "airlock-test"
	cfg.TickMs, cfg.ElectionMs = 50, 500
	cfg.Logger, cfg.LogLevel = "zap", "error"
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return fmt.Errorf("start member %s: %w", m.name, err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(60 * time.Second):
		e.Close()
		return fmt.Errorf("member %s not ready after 60s", m.name)
	}
	c.mu.Lock()
	m.etcd = e
	c.mu.Unlock()
	return nil
}

// freeAddrs returns n distinct loopback addresses with ports nothing
// listens on now (all held open together, so none is drawn twice).
func freeAddrs(t testing.TB, n int) []string {
	t.Helper()
	return testport.Addrs(t, n)
}

// Endpoints are the client URLs of every member, stopped ones included
// (a client skips those it cannot reach).
func (c *Cluster) Endpoints() []string {
	var out []string
	for _, m := range c.members {
		out = append(out, m.client)
	}
	return out
}

// Client returns a client of the cluster, closed at the end of the test.
func (c *Cluster) Client(t testing.TB) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: c.Endpoints(), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatalf("etcdtest: client: %v", err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// Leader returns the index of the member that is leader now, or -1.
func (c *Cluster) Leader() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, m := range c.members {
		if m.etcd != nil && m.etcd.Server.Leader() == m.etcd.Server.MemberID() {
			return i
		}
	}
	return -1
}

// WaitLeader waits until a running member is leader.
func (c *Cluster) WaitLeader(t testing.TB, timeout time.Duration) int {
	t.Helper()
	leader := -1
	if !testreq.Poll(timeout, func() bool { leader = c.Leader(); return leader >= 0 }) {
		t.Fatalf("etcdtest: no leader after %s", timeout)
	}
	return leader
}

// Stop stops member i (as a crash would: no leave, data kept).
func (c *Cluster) Stop(i int) {
	c.mu.Lock()
	e := c.members[i].etcd
	c.members[i].etcd = nil
	c.mu.Unlock()
	if e != nil {
		e.Close()
	}
}

// Restart starts a stopped member i again on its data directory.
func (c *Cluster) Restart(t testing.TB, i int) {
	t.Helper()
	if err := c.start(c.members[i], embed.ClusterStateFlagExisting); err != nil {
		t.Fatalf("etcdtest: %v", err)
	}
}

// Close stops every member.
func (c *Cluster) Close() {
	for i := range c.members {
		c.Stop(i)
	}
}

// Healthy reports whether a quorum answers a linearizable read.
func (c *Cluster) Healthy(ctx context.Context, cli *clientv3.Client) bool {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	_, err := cli.Get(ctx, "health")
	return err == nil
}
