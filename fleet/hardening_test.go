package fleet_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httputil"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/airlockhq/airlock/fleet"
	"github.com/airlockhq/airlock/internal/etcdtest"
	"github.com/airlockhq/airlock/internal/testenv/testreq"
)

// countingKV counts the calls that placement and routing make: reads
// and writes of reservations and session mappings, and transactions.
type countingKV struct {
	clientv3.KV
	n *atomic.Int64
}

func routed(key string) bool {
	return strings.Contains(key, "/alloc/") || strings.Contains(key, "/sessions/")
}

func (c countingKV) Get(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.GetResponse, error) {
	if routed(key) {
		c.n.Add(1)
	}
	return c.KV.Get(ctx, key, opts...)
}

func (c countingKV) Put(ctx context.Context, key, val string, opts ...clientv3.OpOption) (*clientv3.PutResponse, error) {
	if routed(key) {
		c.n.Add(1)
	}
	return c.KV.Put(ctx, key, val, opts...)
}

func (c countingKV) Delete(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.DeleteResponse, error) {
	if routed(key) {
		c.n.Add(1)
	}
	return c.KV.Delete(ctx, key, opts...)
}

func (c countingKV) Txn(ctx context.Context) clientv3.Txn {
	c.n.Add(1)
	return c.KV.Txn(ctx)
}

func totalReservations(nodes []*node) int {
	n := 0
	for _, x := range nodes {
		n += len(nodes[0].f.Reservations(x.id))
	}
	return n
}

// TestReplaysLeaveNoReservation: 200 replays of a session creation with
// a used Idempotency-Key, through every node, leave only the one
// reservation of the session they name.
func TestReplaysLeaveNoReservation(t *testing.T) {
	_, _, nodes := fleetOf(t, 3, opts{capacity: fleet.Capacity{Sessions: 4, Runs: 2}})
	create := func(via *node) (int, string) {
		req, _ := http.NewRequest(http.MethodPost, via.srv.URL+"/v1/sessions", strings.NewReader(`{"size":"small"}`))
		req.Header.Set("Idempotency-Key", "k-1")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var s struct {
			ID string `json:"session_id"`
		}
		json.NewDecoder(resp.Body).Decode(&s)
		return resp.StatusCode, s.ID
	}
	status, id := create(nodes[0])
	if status != http.StatusCreated {
		t.Fatalf("first creation: %d", status)
	}
	testreq.Eventually(t, 5*time.Second, "the session's one reservation", func() bool { return totalReservations(nodes) == 1 })
	for i := 0; i < 200; i++ {
		status, got := create(nodes[i%3])
		if status != http.StatusOK || got != id {
			t.Fatalf("replay %d: %d %s, want 200 %s", i, status, got, id)
		}
	}
	// Every replay freed its reservation before its caller saw the
	// answer, or a moment after: well within PendingTTL, after which the
	// sweep would free a leaked one anyway.
	testreq.Eventually(t, 5*time.Second, "no reservation but the session's", func() bool { return totalReservations(nodes) == 1 })
	// And the fleet still has all its room: three more sessions on
	// the session's node's share and the others'.
	for i := 0; i < 3*4-1; i++ {
		if resp, b := post(t, nodes[i%3].srv.URL+"/v1/sessions", `{}`); resp.StatusCode != http.StatusCreated {
			t.Fatalf("session %d after the replays: %d %s", i, resp.StatusCode, b)
		}
	}
}

// TestAuthBeforePlacement: a request without a valid key is refused with
// a generic 401 problem before any etcd call of placement or routing; a
// valid one is placed (so the counter does count).
func TestAuthBeforePlacement(t *testing.T) {
	var calls atomic.Int64
	c, _, nodes := fleetOf(t, 2, opts{wrapKV: func(kv clientv3.KV) clientv3.KV { return countingKV{kv, &calls} }})
	// Each node campaigns for the reaper in the background once it has
	// started (a transaction that writes its candidacy); count from when
	// both have, so only the requests' calls are counted.
	cli := c.Client(t)
	testreq.Eventually(t, 10*time.Second, "both nodes' reaper candidacies", func() bool {
		resp, err := cli.Get(context.Background(), fleet.DefaultPrefix+"reaper", clientv3.WithPrefix(), clientv3.WithCountOnly())
		return err == nil && resp.Count == 2
	})
	before := calls.Load()
	for i, c := range []struct{ method, path, key, body string }{
		{http.MethodPost, "/v1/sessions", "", `{"size":"small"}`},
		{http.MethodPost, "/v1/sessions", "wrong", `{"size":"small"}`},
		{http.MethodPost, "/v1/execute", "", `{"language":"python","code":"print(1)"}`},
		{http.MethodPost, "/sandboxes", "", `{"templateID":"base"}`},
		{http.MethodPost, "/v1/sessions/no-such-session/exec", "", `{"shell":"id"}`},
		{http.MethodGet, "/v1/sessions/no-such-session", "wrong", ""},
	} {
		req, _ := http.NewRequest(c.method, nodes[i%2].srv.URL+c.path, strings.NewReader(c.body))
		if c.key != "" {
			req.Header.Set("Authorization", "Bearer "+c.key)
		}
		resp, err := http.DefaultClient.Do(req) // no key added
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("Content-Type") != "application/problem+json" ||
			!strings.Contains(string(b), fleet.ProblemUnauthenticated) || strings.Contains(strings.ToLower(string(b)), "etcd") {
			t.Errorf("%s %s with key %q: %d %s", c.method, c.path, c.key, resp.StatusCode, b)
		}
	}
	if n := calls.Load() - before; n != 0 {
		t.Fatalf("anonymous requests made %d etcd calls of placement or routing", n)
	}
	if resp, b := post(t, nodes[0].srv.URL+"/v1/sessions", `{}`); resp.StatusCode != http.StatusCreated {
		t.Fatalf("with the key: %d %s", resp.StatusCode, b)
	}
	if calls.Load() == before {
		t.Fatal("a placed request made no etcd call: the counter counts nothing")
	}
}

// recorder keeps the requests that reach a node from other nodes (those
// with a signature), as they came, so a test can send them again.
type recorder struct {
	mu   sync.Mutex
	reqs [][]byte // dumped requests
}

func (rc *recorder) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get(fleet.HeaderSignature) != "" {
			b, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(b))
			c := r.Clone(r.Context())
			c.Body = io.NopCloser(bytes.NewReader(b))
			dump, _ := httputil.DumpRequest(c, true)
			rc.mu.Lock()
			rc.reqs = append(rc.reqs, dump)
			rc.mu.Unlock()
		}
		next.ServeHTTP(w, r)
	})
}

func (rc *recorder) last(t *testing.T) *http.Request {
	t.Helper()
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if len(rc.reqs) == 0 {
		t.Fatal("no forwarded request was recorded")
	}
	r, err := http.ReadRequest(bufioReader(rc.reqs[len(rc.reqs)-1]))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestForwardSignature: a forwarded request sent again (a replay) is
// refused, and so are one whose body or path was changed and one whose
// signature is wrong; the original was served.
func TestForwardSignature(t *testing.T) {
	c := etcdtest.Start(t, 3)
	st := newStore()
	rec := &recorder{}
	a := startNode(t, c, st, "a", opts{front: rec.wrap})
	b := startNode(t, c, st, "b", opts{})
	testreq.Eventually(t, 5*time.Second, "b sees a", func() bool { return len(b.f.Members()) == 2 })
	// A session on a, and an upload to it through b (forwarded, signed).
	var id string
	for id == "" {
		resp, body := post(t, b.srv.URL+"/v1/sessions", `{}`)
		if resp.StatusCode != 201 {
			t.Fatalf("create: %d %s", resp.StatusCode, body)
		}
		if resp.Header.Get(fleet.HeaderNode) == "a" {
			var s struct {
				ID string `json:"session_id"`
			}
			json.Unmarshal(body, &s)
			id = s.ID
		}
	}
	req, _ := http.NewRequest(http.MethodPut, b.srv.URL+"/v1/sessions/"+id+"/files?path=/x", strings.NewReader("original"))
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get(fleet.HeaderNode) != "a" {
		t.Fatalf("upload through b: %d from %q", resp.StatusCode, resp.Header.Get(fleet.HeaderNode))
	}
	send := func(name string, change func(r *http.Request)) {
		t.Helper()
		r := rec.last(t)
		body, _ := io.ReadAll(r.Body)
		out, _ := http.NewRequest(r.Method, a.srv.URL+r.RequestURI, bytes.NewReader(body))
		out.Header = r.Header.Clone()
		if change != nil {
			change(out)
		}
		resp, err := http.DefaultClient.Do(out)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(string(b), fleet.ProblemForwardRefused) {
			t.Errorf("%s: %d %s, want 401 %s", name, resp.StatusCode, b, fleet.ProblemForwardRefused)
		}
	}
	send("the same forward again", nil)
	send("another body", func(r *http.Request) {
		r.Body, r.ContentLength = io.NopCloser(strings.NewReader("replaced")), 8
		r.Header.Set(fleet.HeaderSigNonce, strings.Repeat("ab", 16)) // a fresh nonce
	})
	send("another path", func(r *http.Request) {
		r.URL.RawQuery = "path=/etc/other"
		r.Header.Set(fleet.HeaderSigNonce, strings.Repeat("cd", 16))
	})
	send("a wrong signature", func(r *http.Request) {
		r.Header.Set(fleet.HeaderSignature, strings.Repeat("00", 32))
		r.Header.Set(fleet.HeaderSigNonce, strings.Repeat("ef", 16))
	})
	send("an old time", func(r *http.Request) {
		r.Header.Set(fleet.HeaderSigTime, fmt.Sprint(time.Now().Add(-time.Hour).Unix()))
	})
}

// TestNodeRanges: a node whose address is outside the configured ranges
// is never sent a request.
func TestNodeRanges(t *testing.T) {
	c := etcdtest.Start(t, 3)
	st := newStore()
	var reached atomic.Int64
	a := startNode(t, c, st, "a", opts{nodeRanges: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}})
	b := startNode(t, c, st, "b", opts{front: func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get(fleet.HeaderSignature) != "" {
				reached.Add(1)
			}
			h.ServeHTTP(w, r)
		})
	}})
	testreq.Eventually(t, 5*time.Second, "a sees b", func() bool { return len(a.f.Members()) == 2 })
	resp, body := post(t, b.srv.URL+"/v1/sessions", `{}`) // b makes it: b's own ranges are the defaults
	for resp.StatusCode == 201 && resp.Header.Get(fleet.HeaderNode) != "b" {
		resp, body = post(t, b.srv.URL+"/v1/sessions", `{}`)
	}
	if resp.StatusCode != 201 {
		t.Fatalf("create on b: %d %s", resp.StatusCode, body)
	}
	var s struct {
		ID string `json:"session_id"`
	}
	json.Unmarshal(body, &s)
	before := reached.Load()
	r, err := client.Get(a.srv.URL + "/v1/sessions/" + s.ID + "/output")
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(r.Body)
	r.Body.Close()
	if r.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(got), "session-node-unreachable") {
		t.Fatalf("a request for b's session through a: %d %s", r.StatusCode, got)
	}
	if reached.Load() != before {
		t.Fatal("a forwarded to an address outside its node ranges")
	}
}

// TestRunsNotStarvedBySessions: sessions that take every CPU a node
// offers them leave its run slots free.
func TestRunsNotStarvedBySessions(t *testing.T) {
	// Sessions reserve 250 mCPU: two fill the 500 each node bounds.
	_, _, nodes := fleetOf(t, 2, opts{capacity: fleet.Capacity{CPUMilli: 500, Sessions: 10, Runs: 2}})
	made := 0
	for i := 0; i < 6; i++ {
		resp, _ := post(t, nodes[i%2].srv.URL+"/v1/sessions", `{}`)
		if resp.StatusCode == http.StatusCreated {
			made++
		}
	}
	if made != 4 {
		t.Fatalf("%d sessions made; the nodes' CPU bound holds 4", made)
	}
	for i := 0; i < 10; i++ {
		if resp, b := post(t, nodes[i%2].srv.URL+"/v1/execute", `{"language":"python","code":"print(1)"}`); resp.StatusCode != 200 {
			t.Fatalf("run %d beside CPU-full sessions: %d %s", i, resp.StatusCode, b)
		}
	}
}

func bufioReader(b []byte) *bufio.Reader { return bufio.NewReader(bytes.NewReader(b)) }
