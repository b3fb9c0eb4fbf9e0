package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/airlockhq/airlock/fleet"
	"github.com/airlockhq/airlock/internal/etcdtest"
	"github.com/airlockhq/airlock/internal/testenv/testport"
	"github.com/airlockhq/airlock/internal/testenv/testreq"
	"github.com/airlockhq/airlock/internal/testpg"
)

// The fleet harness: N airlockd nodes of the node harness, on one
// PostgreSQL database and one three-member etcd cluster, all on
// loopback.
//
// etcd runs inside the test process (the embed package): the test
// chooses its ports and data directories, knows which member leads, and
// stops a member at once; each node reaches it through a loopback proxy
// of the test's so that one node alone can be cut off from it.

// Settings of a test fleet: fleetNodes nodes on this machine, each
// offering fleetSessions small sessions (0.1 CPU, 128 MiB: gVisor
// sandboxes of image base, no pool, no snapshots, no network;
// AIRLOCK_FLEET_SESSIONS sets another number) and fleetRuns one-shot
// slots; leases of fleetTTL.
const (
	fleetNodes  = 3
	fleetRuns   = 3
	fleetTTL    = 3 * time.Second
	fleetSecret = "fleet-e2e-secret-0123456789"
)

var fleetSessions = func() int {
	if n, err := strconv.Atoi(os.Getenv("AIRLOCK_FLEET_SESSIONS")); err == nil && n >= 4 {
		return n
	}
	return 8
}()

// fleetOptions shape a test fleet.
type fleetOptions struct {
	// extra are flags appended to every node's.
	extra []string
	// env is added to every node's environment.
	env []string
	// sessions is every node's --max-sessions (default fleetSessions).
	sessions int
}

// fleetNode is one node of the fleet: its state directory, cgroup
// parent and fixed address, its way to etcd, and the airlockd running
// on it.
type fleetNode struct {
	*testNode
	id    string
	addr  string // 127.0.0.1:port
	flags []string
	cut   *cutProxies
	d     *daemon
}

func (n *fleetNode) url() string { return "http://" + n.addr }

// testFleet is fleetNodes airlockd nodes on one PostgreSQL and one etcd.
type testFleet struct {
	t     *testing.T
	nodes []*fleetNode
	key   string // tenant default's
	pg    *testpg.Server
	etcd  *etcdtest.Cluster
	ecli  *clientv3.Client
}

// startTestFleet starts PostgreSQL, etcd and the nodes, one after
// another (the first makes tenant default), waits until every node is a
// member, and cleans all up when the test ends.
func startTestFleet(t *testing.T, o fleetOptions) *testFleet {
	t.Helper()
	tf := &testFleet{t: t, pg: startPostgres(t), etcd: etcdtest.Start(t, 3)}
	tf.ecli = tf.etcd.Client(t)
	bin := ""
	sessions := fleetSessions
	if o.sessions > 0 {
		sessions = o.sessions
	}
	for i := 0; i < fleetNodes; i++ {
		id := fmt.Sprintf("n%d", i)
		n := &fleetNode{id: id, addr: freeLoopback(t)}
		n.testNode = newTestNode(t, nodeOptions{name: "fleet-" + id, bin: bin, listen: n.addr, env: o.env})
		bin = n.bin
		n.cut = newCutProxies(t, tf.etcd.Endpoints())
		n.flags = append(append([]string{"--store", tf.pg.URL("airlock"), "--no-egress"}, quiet...),
			"--etcd", strings.Join(n.cut.endpoints(), ","), "--node-id", n.id, "--fleet-secret", fleetSecret,
			"--fleet-lease-ttl", fleetTTL.String(), "--max-sessions", fmt.Sprint(sessions), "--max-sessions-per-tenant", "100",
			// Default session sizes (small: 1 CPU) and no --fleet-cpus: a
			// node of the fleet takes the sessions it would take alone.
			"--max-concurrent", fmt.Sprint(fleetRuns), "--keep-sessions=false")
		n.flags = append(n.flags, o.extra...)
		tf.nodes = append(tf.nodes, n)
	}
	for _, n := range tf.nodes {
		tf.start(n)
	}
	tf.key = tf.nodes[0].key()
	testreq.Eventually(t, 20*time.Second, fmt.Sprintf("%d members in etcd", fleetNodes), func() bool { return len(tf.members()) == fleetNodes })
	return tf
}

// start starts airlockd on n (again) with the fleet's flags.
func (tf *testFleet) start(n *fleetNode) {
	tf.t.Helper()
	n.d = n.start(n.flags...)
}

// members are the fleet's members as etcd has them.
func (tf *testFleet) members() map[string]fleet.Node {
	resp, err := tf.ecli.Get(context.Background(), fleet.DefaultPrefix+"nodes/", clientv3.WithPrefix())
	out := map[string]fleet.Node{}
	if err != nil {
		return out
	}
	for _, kv := range resp.Kvs {
		var n fleet.Node
		if json.Unmarshal(kv.Value, &n) == nil {
			out[n.ID] = n
		}
	}
	return out
}

// call sends one request to a node with tenant default's key.
func (tf *testFleet) call(n *fleetNode, method, path, body string) rawResponse {
	tf.t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	return send(tf.t, method, n.url()+path, tf.key, r)
}

// freeLoopback is a loopback address with a port free a moment ago.
func freeLoopback(t *testing.T) string {
	t.Helper()
	return testport.Addr(t)
}

// cutProxies are loopback TCP proxies, one per etcd member, through
// which one node reaches etcd; cut drops every connection and refuses
// new ones until restore.
type cutProxies struct {
	mu     sync.Mutex
	lns    []net.Listener
	conns  map[net.Conn]bool
	isCut  bool
	closed bool
}

func newCutProxies(t *testing.T, targets []string) *cutProxies {
	t.Helper()
	p := &cutProxies{conns: map[net.Conn]bool{}}
	for _, target := range targets {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		p.lns = append(p.lns, ln)
		to := strings.TrimPrefix(target, "http://")
		go p.serve(ln, to)
	}
	t.Cleanup(p.close)
	return p
}

func (p *cutProxies) serve(ln net.Listener, to string) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.isCut || p.closed {
			p.mu.Unlock()
			c.Close()
			continue
		}
		p.conns[c] = true
		p.mu.Unlock()
		go func() {
			u, err := net.DialTimeout("tcp", to, 2*time.Second)
			if err != nil {
				p.drop(c)
				return
			}
			p.mu.Lock()
			if p.isCut || p.closed {
				p.mu.Unlock()
				u.Close()
				p.drop(c)
				return
			}
			p.conns[u] = true
			p.mu.Unlock()
			go func() { io.Copy(u, c); p.drop(u) }()
			io.Copy(c, u)
			p.drop(c)
		}()
	}
}

func (p *cutProxies) drop(c net.Conn) {
	c.Close()
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
}

func (p *cutProxies) endpoints() []string {
	var out []string
	for _, ln := range p.lns {
		out = append(out, "http://"+ln.Addr().String())
	}
	sort.Strings(out)
	return out
}

func (p *cutProxies) cut() {
	p.mu.Lock()
	p.isCut = true
	var cs []net.Conn
	for c := range p.conns {
		cs = append(cs, c)
	}
	p.mu.Unlock()
	for _, c := range cs {
		c.Close()
	}
}

func (p *cutProxies) restore() {
	p.mu.Lock()
	p.isCut = false
	p.mu.Unlock()
}

func (p *cutProxies) close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.cut()
	for _, ln := range p.lns {
		ln.Close()
	}
}
