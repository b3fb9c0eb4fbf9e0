package fleet_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/fleet"
	"github.com/airlockhq/airlock/internal/etcdtest"
	"github.com/airlockhq/airlock/internal/testenv/testreq"
)

const (
	secret  = "a-fleet-secret-of-test"
	testKey = "test-key-of-tenant-t1"
)

// auth is the tenants' keys as the fleet checks them: one key, of t1.
var auth = fleet.AuthFunc(func(r *http.Request) (string, error) {
	if r.Header.Get("Authorization") == "Bearer "+testKey {
		return "t1", nil
	}
	return "", airlock.ErrUnauthorized
})

// client sends every request with the tenant's key.
var client = &http.Client{Transport: keyed{http.DefaultTransport}}

type keyed struct{ base http.RoundTripper }

func (k keyed) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	if r.Header.Get("Authorization") == "" {
		r.Header.Set("Authorization", "Bearer "+testKey)
	}
	return k.base.RoundTrip(r)
}

// store is a shared store of the sessions of every node.
type store struct {
	mu       sync.Mutex
	sessions map[string]*rec   // by ID
	idem     map[string]string // idempotency key to session
}

type rec struct {
	node, state, reason string
}

func newStore() *store { return &store{sessions: map[string]*rec{}, idem: map[string]string{}} }

func (s *store) add(id, node string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sessions[id] = &rec{node: node, state: "ready"}
}

func (s *store) state(id string) (string, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.sessions[id]
	if r == nil {
		return "", ""
	}
	return r.state, r.reason
}

func (s *store) MarkNodeLost(_ context.Context, node, detail string) (int, int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, r := range s.sessions {
		if r.node == node && r.state == "ready" {
			r.state, r.reason = "lost", fleet.EndNodeLost
			n++
		}
	}
	return n, 0, nil
}

func (s *store) LiveSessionNodes(context.Context) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	seen := map[string]bool{}
	var out []string
	for _, r := range s.sessions {
		if r.state == "ready" && !seen[r.node] {
			seen[r.node] = true
			out = append(out, r.node)
		}
	}
	return out, nil
}

// local is one node's sessions: those of the shared store it holds.
type local struct {
	node      string
	st        *store
	mu        sync.Mutex
	held      map[string]bool
	abandoned []string
	templates []string // published in Status
}

func (l *local) Held(context.Context) ([]string, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for id := range l.held {
		out = append(out, id)
	}
	return out, nil
}

func (l *local) Abandon(_ context.Context, id, _ string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.held, id)
	l.abandoned = append(l.abandoned, id)
	return nil
}

func (l *local) Status(context.Context) fleet.Status {
	l.mu.Lock()
	defer l.mu.Unlock()
	return fleet.Status{Templates: l.templates}
}

// node is one member: a fleet in front of a fake API.
type node struct {
	id    string
	f     *fleet.Fleet
	local *local
	srv   *httptest.Server
	seq   atomic.Int64
	runs  atomic.Int64 // runs being served now
	peak  atomic.Int64 // most runs served at once
}

func demand(r fleet.Request) (fleet.Demand, error) {
	if r.Kind == fleet.KindRun {
		return fleet.Demand{CPUMilli: 100, MemoryMiB: 64}, nil
	}
	return fleet.Demand{CPUMilli: 250, MemoryMiB: 128}, nil
}

type opts struct {
	wrapKV     func(clientv3.KV) clientv3.KV // counts etcd calls
	nodeRanges []netip.Prefix
	front      func(http.Handler) http.Handler // in front of the node's address (a recorder)
	capacity   fleet.Capacity
	ttl        time.Duration
	leaseFile  string
	tiers      []string
	templates  []string       // the node holds these templates
	affinity   fleet.Affinity // resolves templates and volumes
}

func startNode(t testing.TB, c *etcdtest.Cluster, st *store, id string, o opts) *node {
	t.Helper()
	n := &node{id: id, local: &local{node: id, st: st, held: map[string]bool{}, templates: o.templates}}
	var h http.Handler
	var front http.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { h.ServeHTTP(w, r) })
	if o.front != nil {
		front = o.front(front)
	}
	n.srv = httptest.NewServer(front)
	t.Cleanup(n.srv.Close)
	if o.capacity == (fleet.Capacity{}) {
		o.capacity = fleet.Capacity{CPUMilli: 8000, MemoryMiB: 4096, Sessions: 10, Runs: 4}
	}
	if o.ttl == 0 {
		o.ttl = 2 * time.Second
	}
	if o.tiers == nil {
		o.tiers = []string{"kernel"}
	}
	cli := c.Client(t)
	if o.wrapKV != nil {
		cli.KV = o.wrapKV(cli.KV)
	}
	f, err := fleet.New(fleet.Config{
		NodeRanges: o.nodeRanges,
		Client:     cli, NodeID: id, Addr: n.srv.URL, Tiers: o.tiers, Capacity: o.capacity, Demand: demand,
		Secret: secret, Auth: auth, Local: n.local, Store: st, LeaseTTL: o.ttl, LeaseFile: o.leaseFile, Affinity: o.affinity,
		SweepEvery: 200 * time.Millisecond, ReapEvery: 200 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	h = f.Handler(n.api())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := f.Start(ctx); err != nil {
		t.Fatal(err)
	}
	n.f = f
	t.Cleanup(func() { f.Close(context.Background(), true) })
	return n
}

// api is a stand-in of a node's HTTP API: sessions made here are held
// here, every answer names the node, and one route streams events.
func (n *node) api() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/sessions", func(w http.ResponseWriter, r *http.Request) {
		if key := r.Header.Get("Idempotency-Key"); key != "" {
			// As the REST API: a used key answers 200 with the session
			// it made, wherever that is.
			n.local.st.mu.Lock()
			prev, ok := n.local.st.idem[key]
			if !ok {
				prev = fmt.Sprintf("%s-s%d", n.id, n.seq.Add(1))
				n.local.st.idem[key] = prev
			}
			n.local.st.mu.Unlock()
			if ok {
				w.Header().Set("Idempotent-Replayed", "true")
				w.WriteHeader(http.StatusOK)
				json.NewEncoder(w).Encode(map[string]string{"session_id": prev})
				return
			}
			n.local.st.add(prev, n.id)
			n.local.mu.Lock()
			n.local.held[prev] = true
			n.local.mu.Unlock()
			w.WriteHeader(http.StatusCreated)
			json.NewEncoder(w).Encode(map[string]string{"session_id": prev})
			return
		}
		id := fmt.Sprintf("%s-s%d", n.id, n.seq.Add(1))
		n.local.st.add(id, n.id)
		n.local.mu.Lock()
		n.local.held[id] = true
		n.local.mu.Unlock()
		w.WriteHeader(http.StatusCreated)
		json.NewEncoder(w).Encode(map[string]string{"session_id": id})
	})
	mux.HandleFunc("POST /v1/execute", func(w http.ResponseWriter, r *http.Request) {
		now := n.runs.Add(1)
		defer n.runs.Add(-1)
		for {
			peak := n.peak.Load()
			if now <= peak || n.peak.CompareAndSwap(peak, now) {
				break
			}
		}
		io.Copy(io.Discard, r.Body)
		fmt.Fprintf(w, `{"node":%q}`, n.id)
	})
	mux.HandleFunc("DELETE /v1/sessions/{id}", func(w http.ResponseWriter, r *http.Request) {
		n.local.mu.Lock()
		ok := n.local.held[r.PathValue("id")]
		delete(n.local.held, r.PathValue("id"))
		n.local.mu.Unlock()
		if !ok {
			http.Error(w, "no such session here", http.StatusNotFound)
			return
		}
		fmt.Fprintf(w, `{"node":%q}`, n.id)
	})
	mux.HandleFunc("DELETE /v1/volumes/{name}", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `{"node":%q}`, n.id)
	})
	mux.HandleFunc("PUT /v1/sessions/{id}/files", func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, `{"node":%q,"size":%d}`, n.id, len(b))
	})
	mux.HandleFunc("GET /v1/sessions/{id}/output", func(w http.ResponseWriter, r *http.Request) {
		// Two events; the second only after the client acknowledged the
		// first through another request, which shows the first was
		// flushed through the proxy and not held back.
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprintf(w, "event: one\ndata: %s\n\n", n.id)
		w.(http.Flusher).Flush()
		select {
		case <-acks:
		case <-time.After(10 * time.Second):
			fmt.Fprintf(w, "event: timeout\ndata: x\n\n")
			return
		}
		fmt.Fprintf(w, "event: two\ndata: %s\n\n", n.id)
	})
	mux.HandleFunc("POST /ack", func(w http.ResponseWriter, r *http.Request) { acks <- struct{}{} })
	return mux
}

var acks = make(chan struct{}, 1)

func TestMain(m *testing.M) { os.Exit(m.Run()) }

func fleetOf(t testing.TB, n int, o opts) (*etcdtest.Cluster, *store, []*node) {
	c := etcdtest.Start(t, 3)
	st := newStore()
	var nodes []*node
	for i := 0; i < n; i++ {
		nodes = append(nodes, startNode(t, c, st, fmt.Sprintf("n%d", i), o))
	}
	testreq.Eventually(t, 10*time.Second, "every node sees every member", func() bool {
		for _, x := range nodes {
			if len(x.f.Members()) != n {
				return false
			}
		}
		return true
	})
	return c, st, nodes
}

func post(t *testing.T, url, body string) (*http.Response, []byte) {
	t.Helper()
	resp, err := client.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

// TestNoOvercommit: three nodes placing at once never put more on a node
// than it declared, and fill the fleet exactly.
func TestNoOvercommit(t *testing.T) {
	caps := fleet.Capacity{CPUMilli: 100000, MemoryMiB: 100000, Sessions: 7, Runs: 2}
	_, _, nodes := fleetOf(t, 3, opts{capacity: caps})
	var ok, full atomic.Int64
	var wg sync.WaitGroup
	for _, n := range nodes {
		for w := 0; w < 4; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < 8; i++ {
					resp, err := client.Post(n.srv.URL+"/v1/sessions", "application/json", strings.NewReader(`{"size":"small"}`))
					if err != nil {
						t.Error(err)
						return
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					switch resp.StatusCode {
					case http.StatusCreated:
						ok.Add(1)
					case http.StatusServiceUnavailable:
						full.Add(1)
					default:
						t.Errorf("status %d", resp.StatusCode)
					}
				}
			}()
		}
	}
	wg.Wait()
	if ok.Load() != 21 || full.Load() != 96-21 {
		t.Fatalf("%d sessions made and %d refused; want 21 and %d", ok.Load(), full.Load(), 96-21)
	}
	for _, n := range nodes {
		if got := len(n.local.held); got != caps.Sessions {
			t.Errorf("node %s holds %d sessions; capacity %d", n.id, got, caps.Sessions)
		}
		if got := len(nodes[0].f.Reservations(n.id)); got > caps.Sessions {
			t.Errorf("node %s has %d reservations; capacity %d", n.id, got, caps.Sessions)
		}
	}
}

// TestForward: a session made through one node is served by its node
// through every other: deletes, uploads and an event stream that is
// flushed event by event.
func TestForward(t *testing.T) {
	_, _, nodes := fleetOf(t, 3, opts{})
	resp, b := post(t, nodes[0].srv.URL+"/v1/sessions", `{}`)
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("create: %d %s", resp.StatusCode, b)
	}
	var s struct {
		ID string `json:"session_id"`
	}
	json.Unmarshal(b, &s)
	owner := resp.Header.Get(fleet.HeaderNode)
	if !strings.HasPrefix(s.ID, owner+"-") {
		t.Fatalf("session %s answered by %s", s.ID, owner)
	}
	for _, via := range nodes {
		// Upload through each node lands on the owner.
		req, _ := http.NewRequest(http.MethodPut, via.srv.URL+"/v1/sessions/"+s.ID+"/files?path=/x", strings.NewReader(strings.Repeat("y", 1<<20)))
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if want := fmt.Sprintf(`{"node":%q,"size":%d}`, owner, 1<<20); string(b) != want {
			t.Errorf("upload via %s: %s, want %s", via.id, b, want)
		}
		// The event stream through each node.
		resp, err = client.Get(via.srv.URL + "/v1/sessions/" + s.ID + "/output")
		if err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 256)
		nr, _ := resp.Body.Read(buf)
		if first := string(buf[:nr]); !strings.Contains(first, "event: one\ndata: "+owner) {
			t.Fatalf("first event via %s: %q", via.id, first)
		}
		post(t, nodes[0].srv.URL+"/ack", "") // served by node 0 itself
		rest, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(rest), "event: two") {
			t.Fatalf("second event via %s: %q", via.id, rest)
		}
	}
	// A client cannot pose as a node: a forged signature is refused.
	req, _ := http.NewRequest(http.MethodDelete, nodes[1].srv.URL+"/v1/sessions/"+s.ID, nil)
	req.Header.Set(fleet.HeaderSignature, "guess")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(string(b), fleet.ProblemForwardRefused) {
		t.Fatalf("delete with a forged signature: %d %s", resp.StatusCode, b)
	}
	req, _ = http.NewRequest(http.MethodDelete, nodes[1].srv.URL+"/v1/sessions/"+s.ID, nil)
	resp, err = client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get(fleet.HeaderNode) != owner {
		t.Fatalf("delete via n1: %d from %s: %s", resp.StatusCode, resp.Header.Get(fleet.HeaderNode), b)
	}
	// The mapping and the reservation go with the session, in one
	// transaction; node 2 sees them through two watches, which converge
	// independently.
	testreq.Eventually(t, 5*time.Second, "the deleted session's reservation and mapping are gone", func() bool {
		_, mapped := nodes[2].f.Owner(context.Background(), s.ID)
		return len(nodes[2].f.Reservations(owner)) == 0 && !mapped
	})
}

// TestRunsSpread: one-shot runs are placed over every node, and a run's
// reservation ends with it.
func TestRunsSpread(t *testing.T) {
	_, _, nodes := fleetOf(t, 3, opts{})
	seen := map[string]int{}
	for i := 0; i < 30; i++ {
		resp, b := post(t, nodes[i%3].srv.URL+"/v1/execute", `{"language":"python","code":"print(1)"}`)
		if resp.StatusCode != 200 {
			t.Fatalf("run: %d %s", resp.StatusCode, b)
		}
		var v struct{ Node string }
		json.Unmarshal(b, &v)
		seen[v.Node]++
	}
	if len(seen) != 3 {
		t.Fatalf("runs landed on %v; want all three nodes", seen)
	}
	testreq.Eventually(t, 5*time.Second, "no reservation is left", func() bool {
		for _, n := range nodes {
			if len(nodes[0].f.Reservations(n.id)) != 0 {
				return false
			}
		}
		return true
	})
}

// TestTiers: a request for a tier only one node offers goes there; one
// for a tier none offers is a 503 problem.
func TestTiers(t *testing.T) {
	c := etcdtest.Start(t, 3)
	st := newStore()
	a := startNode(t, c, st, "a", opts{tiers: []string{"container"}})
	b := startNode(t, c, st, "b", opts{tiers: []string{"container", "kernel"}})
	testreq.Eventually(t, 5*time.Second, "a sees b", func() bool { return len(a.f.Members()) == 2 })
	for i := 0; i < 5; i++ {
		resp, body := post(t, a.srv.URL+"/v1/sessions", `{"isolation":"kernel"}`)
		if resp.StatusCode != 201 || resp.Header.Get(fleet.HeaderNode) != "b" {
			t.Fatalf("kernel session: %d from %q: %s", resp.StatusCode, resp.Header.Get(fleet.HeaderNode), body)
		}
	}
	resp, body := post(t, b.srv.URL+"/v1/sessions", `{"isolation":"vm"}`)
	if resp.StatusCode != 503 || !strings.Contains(string(body), fleet.ProblemNoNode) || resp.Header.Get("Content-Type") != "application/problem+json" {
		t.Fatalf("vm session: %d %s", resp.StatusCode, body)
	}
}

// TestLostNode: a node that stops renewing its lease has its sessions
// marked lost within the TTL and a margin, and placements skip it.
func TestLostNode(t *testing.T) {
	const ttl = 2 * time.Second
	_, st, nodes := fleetOf(t, 3, opts{ttl: ttl})
	var ids []string
	for i := 0; i < 9; i++ {
		_, b := post(t, nodes[i%3].srv.URL+"/v1/sessions", `{}`)
		var s struct {
			ID string `json:"session_id"`
		}
		json.Unmarshal(b, &s)
		ids = append(ids, s.ID)
	}
	victim := nodes[2]
	victim.f.Close(context.Background(), false) // stops renewing, as a killed process would
	victim.srv.Close()
	killed := time.Now()
	var mine []string
	for _, id := range ids {
		if strings.HasPrefix(id, victim.id+"-") {
			mine = append(mine, id)
		}
	}
	if len(mine) == 0 {
		t.Fatal("no session landed on the victim")
	}
	testreq.Eventually(t, ttl+5*time.Second, "the lost node's sessions are marked lost", func() bool {
		for _, id := range mine {
			if s, why := st.state(id); s != "lost" || why != fleet.EndNodeLost {
				return false
			}
		}
		return true
	})
	took := time.Since(killed)
	t.Logf("lost node detected after %v (lease TTL %v)", took.Round(10*time.Millisecond), ttl)
	if took > ttl+3*time.Second {
		t.Errorf("detection took %v; bound is TTL + 3s", took)
	}
	for _, id := range ids {
		if s, _ := st.state(id); !strings.HasPrefix(id, victim.id+"-") && s != "ready" {
			t.Errorf("session %s of a live node is %s", id, s)
		}
	}
	for i := 0; i < 10; i++ {
		resp, b := post(t, nodes[i%2].srv.URL+"/v1/sessions", `{}`)
		if resp.StatusCode != 201 || resp.Header.Get(fleet.HeaderNode) == victim.id {
			t.Fatalf("after the loss: %d from %s: %s", resp.StatusCode, resp.Header.Get(fleet.HeaderNode), b)
		}
	}
}

// TestDeadNodeBeforeExpiry: a node killed a moment ago is still a member;
// a creation placed on it is placed again elsewhere, not failed.
func TestDeadNodeBeforeExpiry(t *testing.T) {
	_, _, nodes := fleetOf(t, 3, opts{ttl: 30 * time.Second})
	nodes[2].srv.Close() // the process is gone; its lease is not yet
	for i := 0; i < 12; i++ {
		resp, b := post(t, nodes[i%2].srv.URL+"/v1/sessions", `{}`)
		if resp.StatusCode != 201 || resp.Header.Get(fleet.HeaderNode) == "n2" {
			t.Fatalf("%d from %s: %s", resp.StatusCode, resp.Header.Get(fleet.HeaderNode), b)
		}
	}
	testreq.Eventually(t, 5*time.Second, "the dead node's reservations are freed", func() bool {
		return len(nodes[0].f.Reservations("n2")) == 0
	})
}

// TestLeaseLost: a node whose lease is gone (cut off from etcd past its
// TTL; here revoked) destroys the sandboxes of its sessions, which the
// fleet marked lost, and joins again as a new incarnation.
func TestLeaseLost(t *testing.T) {
	c, st, nodes := fleetOf(t, 3, opts{})
	var mine []string
	for len(mine) < 2 {
		resp, b := post(t, nodes[0].srv.URL+"/v1/sessions", `{}`)
		var s struct {
			ID string `json:"session_id"`
		}
		json.Unmarshal(b, &s)
		if resp.Header.Get(fleet.HeaderNode) == "n1" {
			mine = append(mine, s.ID)
		}
	}
	victim := nodes[1]
	before := victim.f.Self()
	cli := c.Client(t)
	if _, err := cli.Revoke(context.Background(), clientv3.LeaseID(before.Lease)); err != nil {
		t.Fatal(err)
	}
	testreq.Eventually(t, 10*time.Second, "the node abandons its sessions and joins again", func() bool {
		victim.local.mu.Lock()
		n := len(victim.local.abandoned)
		victim.local.mu.Unlock()
		self := victim.f.Self()
		return n == len(mine) && self.Incarnation != before.Incarnation && self.Lease != before.Lease
	})
	testreq.Eventually(t, 5*time.Second, "its sessions are marked lost", func() bool {
		for _, id := range mine {
			if s, _ := st.state(id); s != "lost" {
				return false
			}
		}
		return true
	})
	testreq.Eventually(t, 5*time.Second, "the others see it back", func() bool {
		for _, m := range nodes[0].f.Members() {
			if m.ID == "n1" && m.Incarnation == victim.f.Self().Incarnation {
				return true
			}
		}
		return false
	})
}

// TestRestartKeepsLease: a node started again within its TTL takes its
// lease back, so its sessions stay mapped and are not marked lost.
func TestRestartKeepsLease(t *testing.T) {
	c := etcdtest.Start(t, 3)
	st := newStore()
	lf := t.TempDir() + "/lease"
	a := startNode(t, c, st, "a", opts{ttl: 5 * time.Second, leaseFile: lf})
	b := startNode(t, c, st, "b", opts{ttl: 5 * time.Second})
	testreq.Eventually(t, 5*time.Second, "b sees a", func() bool { return len(b.f.Members()) == 2 })
	lease := a.f.Self().Lease
	a.f.Close(context.Background(), false)
	a2 := startNode(t, c, st, "a", opts{ttl: 5 * time.Second, leaseFile: lf})
	if a2.f.Self().Lease != lease {
		t.Fatalf("restart took lease %x; the old one %x was alive", a2.f.Self().Lease, lease)
	}
}

// TestEtcdLeaderLoss: placements go on while the etcd leader is stopped,
// and none is lost.
func TestEtcdLeaderLoss(t *testing.T) {
	c, _, nodes := fleetOf(t, 3, opts{capacity: fleet.Capacity{CPUMilli: 1 << 30, MemoryMiB: 1 << 30, Sessions: 1000, Runs: 1000}})
	var okN, bad atomic.Int64
	var statuses sync.Map
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i, n := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 5000; j++ {
				select {
				case <-stop:
					return
				default:
				}
				resp, err := client.Post(n.srv.URL+"/v1/execute", "application/json", strings.NewReader(`{}`))
				if err != nil {
					bad.Add(1)
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode == 200 {
					okN.Add(1)
				} else {
					bad.Add(1)
					statuses.Store(fmt.Sprintf("%d-%d", i, resp.StatusCode), true)
				}
			}
		}()
	}
	testreq.Eventually(t, 20*time.Second, "some runs before the loss", func() bool { return okN.Load() > 30 })
	old := c.Leader()
	at := okN.Load()
	c.Stop(old)
	newLeader := c.WaitLeader(t, 20*time.Second)
	if !testreq.Poll(30*time.Second, func() bool { return okN.Load() > at+60 }) {
		t.Fatalf("after the leader loss: %d runs served (%d before), %d failed", okN.Load(), at, bad.Load())
	}
	close(stop)
	wg.Wait()
	var codes []string
	statuses.Range(func(k, _ any) bool { codes = append(codes, k.(string)); return true })
	sort.Strings(codes)
	t.Logf("leader m%d stopped, m%d leads; %d runs served, %d failed %v", old, newLeader, okN.Load(), bad.Load(), codes)
	if bad.Load() != 0 {
		t.Fatalf("%d requests failed across the leader loss: %v", bad.Load(), codes)
	}
}

// TestAdopt: sessions a node holds with no mapping (taken back at a
// restart after its old lease expired) are mapped to it.
func TestAdopt(t *testing.T) {
	c := etcdtest.Start(t, 3)
	st := newStore()
	a := startNode(t, c, st, "a", opts{})
	b := startNode(t, c, st, "b", opts{})
	a.local.mu.Lock()
	a.local.held["kept"] = true
	a.local.mu.Unlock()
	if err := a.f.Adopt(context.Background()); err != nil {
		t.Fatal(err)
	}
	testreq.Eventually(t, 5*time.Second, "b routes the adopted session to a", func() bool {
		owner, ok := b.f.Owner(context.Background(), "kept")
		return ok && owner == "a"
	})
	testreq.Eventually(t, 5*time.Second, "one reservation on a for the adopted session", func() bool {
		return len(b.f.Reservations("a")) == 1
	})
}

// TestRunsWaitForSlots: more runs at once than the fleet has slots wait
// for one instead of failing, and no node runs more than it declared.
func TestRunsWaitForSlots(t *testing.T) {
	caps := fleet.Capacity{CPUMilli: 100000, MemoryMiB: 100000, Sessions: 1, Runs: 1}
	_, _, nodes := fleetOf(t, 3, opts{capacity: caps})
	var wg sync.WaitGroup
	var ok atomic.Int64
	for c := 0; c < 9; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 10; i++ {
				resp, err := client.Post(nodes[(c+i)%3].srv.URL+"/v1/execute", "application/json", strings.NewReader(`{}`))
				if err != nil {
					t.Error(err)
					return
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					t.Errorf("run: %d %s", resp.StatusCode, b)
					return
				}
				ok.Add(1)
			}
		}()
	}
	wg.Wait()
	if ok.Load() != 90 {
		t.Fatalf("%d of 90 runs served", ok.Load())
	}
	for _, n := range nodes {
		if p := n.peak.Load(); p > int64(caps.Runs) {
			t.Errorf("node %s ran %d at once; it declared %d", n.id, p, caps.Runs)
		}
	}
}
