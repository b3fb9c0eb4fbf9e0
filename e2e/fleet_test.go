package e2e_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/airlockhq/airlock/fleet"
	"github.com/airlockhq/airlock/internal/testenv/s3test"
	"github.com/airlockhq/airlock/internal/testenv/testreq"
)

// TestFleet runs three airlockd nodes on one PostgreSQL database and one
// three-member etcd cluster, all on loopback, and checks the fleet end
// to end: runs sent to any node execute and are read from every node;
// sessions made through all nodes at once land within every node's
// declared capacity; the etcd leader stopped during a stream of requests
// loses none of them; a node killed with SIGKILL has its sessions marked
// lost within the lease TTL and a margin, new sessions go elsewhere, and
// when it starts again it removes their sandboxes; a node cut off from
// etcd past its TTL destroys its sessions' sandboxes and joins again
// when etcd is back.
func TestFleet(t *testing.T) {
	// Artifacts in one real S3-compatible bucket, and one signing key
	// file for every node: a URL one node signs downloads from any.
	s3 := s3test.Start(t)
	keyFile := filepath.Join(t.TempDir(), "signing.key")
	signingKey := make([]byte, 32)
	rand.Read(signingKey)
	if err := os.WriteFile(keyFile, []byte(hex.EncodeToString(signingKey)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tf := startTestFleet(t, fleetOptions{extra: []string{"--blobs", s3.BucketURL("prefix=fleet/"), "--signing-key-file", keyFile}, env: s3.Env()})
	ctx := context.Background()
	nodes, pg, etcd := tf.nodes, tf.pg, tf.etcd
	members, call, start := tf.members, tf.call, tf.start

	// 1. Runs through every node: each executes (somewhere), its record
	// is read from every node, and its artifact downloads by its signed
	// URL from every node.
	ranOn := map[string]int{}
	for i := 0; i < 6; i++ {
		code := fmt.Sprintf(`echo fleet-run; echo artifact-%d > out.txt`, i)
		body, _ := json.Marshal(map[string]string{"language": "bash", "code": code})
		resp := call(nodes[i%fleetNodes], http.MethodPost, "/v1/execute", string(body))
		var e struct {
			ID        string `json:"execution_id"`
			Stdout    string `json:"stdout"`
			Artifacts []struct {
				Filename string `json:"filename"`
				URL      string `json:"url"`
			} `json:"artifacts"`
		}
		json.Unmarshal(resp.body, &e)
		if resp.status != 200 || e.Stdout != "fleet-run\n" || len(e.Artifacts) != 1 || e.Artifacts[0].Filename != "out.txt" {
			t.Fatalf("run %d through %s: %d %s", i, nodes[i%fleetNodes].id, resp.status, resp.body)
		}
		ranOn[resp.header.Get(fleet.HeaderNode)]++
		signed, err := url.Parse(e.Artifacts[0].URL)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range nodes {
			got := call(n, http.MethodGet, "/v1/executions/"+e.ID, "")
			if got.status != 200 || !strings.Contains(string(got.body), "fleet-run") {
				t.Errorf("run %s read on %s: %d %s", e.ID, n.id, got.status, got.body)
			}
			// The same signed URL, asked of this node, without a key.
			dl := send(t, http.MethodGet, n.url()+signed.RequestURI(), "", nil)
			if want := fmt.Sprintf("artifact-%d\n", i); dl.status != 200 || string(dl.body) != want {
				t.Errorf("artifact of run %s by its signed URL from %s: %d %q, want %q", e.ID, n.id, dl.status, clip(string(dl.body), 200), want)
			}
		}
	}
	t.Logf("6 runs sent round-robin ran on %v", ranOn)

	// 1b. A caller without a key is refused before placement, with a
	// problem that says no more than that.
	for _, n := range nodes {
		resp := send(t, http.MethodPost, n.url()+"/v1/sessions", "", strings.NewReader(`{"image":"base"}`))
		if resp.status != http.StatusUnauthorized || strings.Contains(strings.ToLower(string(resp.body)), "etcd") {
			t.Errorf("anonymous session through %s: %d %s", n.id, resp.status, resp.body)
		}
	}
	// 1c. 200 replays of a creation with a used Idempotency-Key, through
	// every node, leave no reservation but the session's own.
	allocs := func() int {
		resp, err := tf.ecli.Get(ctx, fleet.DefaultPrefix+"alloc/", clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			t.Fatal(err)
		}
		return int(resp.Count)
	}
	idem := func(n *fleetNode) rawResponse {
		req, _ := http.NewRequest(http.MethodPost, n.url()+"/v1/sessions", strings.NewReader(`{"image":"base","size":"small"}`))
		req.Header.Set("Authorization", "Bearer "+tf.key)
		req.Header.Set("Idempotency-Key", "fleet-replay-1")
		req.Header.Set("Content-Type", "application/json")
		hr, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer hr.Body.Close()
		b, _ := io.ReadAll(hr.Body)
		return rawResponse{status: hr.StatusCode, header: hr.Header, body: b}
	}
	first := idem(nodes[0])
	var replayed struct {
		ID string `json:"session_id"`
	}
	json.Unmarshal(first.body, &replayed)
	if first.status != http.StatusCreated {
		t.Fatalf("creation with an Idempotency-Key: %d %s", first.status, first.body)
	}
	for i := 0; i < 200; i++ {
		resp := idem(nodes[i%fleetNodes])
		var s struct {
			ID string `json:"session_id"`
		}
		json.Unmarshal(resp.body, &s)
		if resp.status != http.StatusOK || s.ID != replayed.ID {
			t.Fatalf("replay %d through %s: %d %s", i, nodes[i%fleetNodes].id, resp.status, clip(string(resp.body), 200))
		}
	}
	testreq.Eventually(t, 5*time.Second, "one reservation after 200 replays", func() bool { return allocs() == 1 })
	if resp := call(nodes[1], http.MethodDelete, "/v1/sessions/"+replayed.ID, ""); resp.status != 200 {
		t.Fatalf("delete the replayed session: %d %s", resp.status, resp.body)
	}
	testreq.Eventually(t, 10*time.Second, "no reservation left", func() bool { return allocs() == 0 })
	t.Logf("200 idempotent replays through %d nodes left no reservation behind", fleetNodes)

	// 2. Sessions through every node at once, more than the fleet
	// holds: exactly its capacity is made, within every node's (its
	// --max-sessions, as it would take alone, with default sizes).
	asked := fleetNodes*fleetSessions + 6
	type made struct{ id, node string }
	var sessions []made
	var refused atomic.Int64
	var smu sync.Mutex
	var wg sync.WaitGroup
	began := time.Now()
	for i := 0; i < asked; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp := call(nodes[i%fleetNodes], http.MethodPost, "/v1/sessions", `{"image":"base","size":"small","timeout_s":900}`)
			switch resp.status {
			case http.StatusCreated:
				var s struct {
					ID string `json:"session_id"`
				}
				json.Unmarshal(resp.body, &s)
				smu.Lock()
				sessions = append(sessions, made{s.ID, resp.header.Get(fleet.HeaderNode)})
				smu.Unlock()
			case http.StatusServiceUnavailable, http.StatusTooManyRequests:
				refused.Add(1)
			default:
				t.Errorf("create session: %d %s", resp.status, resp.body)
			}
		}()
	}
	wg.Wait()
	t.Logf("%d session creations at once through %d nodes: %d made, %d refused, in %v", asked, fleetNodes, len(sessions), refused.Load(), time.Since(began).Round(time.Millisecond))
	perNode := map[string][]string{}
	for _, s := range sessions {
		perNode[s.node] = append(perNode[s.node], s.id)
	}
	for id, ss := range perNode {
		if len(ss) > fleetSessions {
			t.Errorf("node %s took %d sessions; it declared %d", id, len(ss), fleetSessions)
		}
	}
	if len(sessions) != fleetNodes*fleetSessions {
		t.Errorf("%d sessions made; the fleet holds %d", len(sessions), fleetNodes*fleetSessions)
	}
	// The store agrees on where they are.
	raw, err := pgx.Connect(ctx, pg.DSN("airlock"))
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close(ctx)
	rows, err := raw.Query(ctx, `SELECT node_id, count(*) FROM sessions WHERE state IN ('creating', 'ready', 'busy') GROUP BY node_id`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var node string
		var n int
		rows.Scan(&node, &n)
		if n > fleetSessions || n != len(perNode[node]) {
			t.Errorf("the store has %d live sessions on node %q; %d were made there, capacity %d", n, node, len(perNode[node]), fleetSessions)
		}
	}
	rows.Close()
	// A session's exec goes to its node from every node.
	for _, n := range nodes {
		s := sessions[0]
		resp := call(n, http.MethodPost, "/v1/sessions/"+s.id+"/exec", `{"shell":"echo in-session"}`)
		if resp.status != 200 || !strings.Contains(string(resp.body), "in-session") || resp.header.Get(fleet.HeaderNode) != s.node {
			t.Errorf("exec in %s (on %s) through %s: %d from %s: %s", s.id, s.node, n.id, resp.status, resp.header.Get(fleet.HeaderNode), resp.body)
		}
	}

	// 3. The etcd leader stops while requests stream in: none is lost.
	// Half of them are session reads through a node that does not hold
	// the session (the watch cache routes them), half are runs (each
	// placed through etcd).
	var served, failed atomic.Int64
	var failures sync.Map
	stop := make(chan struct{})
	var swg sync.WaitGroup
	for w := 0; w < fleetNodes; w++ {
		swg.Add(1)
		go func() {
			defer swg.Done()
			for j := 0; j < 500; j++ {
				select {
				case <-stop:
					return
				default:
				}
				via := nodes[(w+j)%fleetNodes]
				var resp rawResponse
				if j%2 == 0 {
					resp = call(via, http.MethodPost, "/v1/execute", `{"language":"bash","code":"echo stream"}`)
				} else {
					resp = call(via, http.MethodGet, "/v1/sessions/"+sessions[(w+j)%len(sessions)].id, "")
				}
				if resp.status == 200 {
					served.Add(1)
				} else {
					failed.Add(1)
					failures.Store(fmt.Sprintf("%d %s", resp.status, clip(string(resp.body), 160)), true)
				}
			}
		}()
	}
	testreq.Eventually(t, time.Minute, "requests before the leader stops", func() bool { return served.Load() >= 10 })
	leader := etcd.Leader()
	before := served.Load()
	etcd.Stop(leader)
	next := etcd.WaitLeader(t, 30*time.Second)
	testreq.Eventually(t, 2*time.Minute, "requests after the new leader", func() bool { return served.Load() >= before+20 })
	close(stop)
	swg.Wait()
	t.Logf("etcd leader m%d stopped (m%d leads now): %d requests served, %d failed", leader, next, served.Load(), failed.Load())
	failures.Range(func(k, _ any) bool { t.Errorf("request failed across the leader loss: %s", k); return true })
	etcd.Restart(t, leader)

	// 4. SIGKILL a node: its sessions are lost within TTL + margin, and
	// new sessions go elsewhere.
	victim := nodes[2]
	victimSessions := perNode[victim.id]
	if len(victimSessions) == 0 {
		t.Fatalf("no session on %s to lose", victim.id)
	}
	victim.d.kill(t)
	killed := time.Now()
	lostBy := fleetTTL + 5*time.Second
	testreq.Eventually(t, lostBy+10*time.Second, "the killed node's sessions marked lost", func() bool {
		for _, id := range victimSessions {
			resp := call(nodes[0], http.MethodGet, "/v1/sessions/"+id, "")
			var s struct {
				State     string `json:"state"`
				EndReason string `json:"end_reason"`
			}
			json.Unmarshal(resp.body, &s)
			if s.State != "lost" || s.EndReason != "node_lost" {
				return false
			}
		}
		return true
	})
	detect := time.Since(killed)
	t.Logf("SIGKILLed node %s: its %d sessions marked lost after %v (lease TTL %v)", victim.id, len(victimSessions), detect.Round(10*time.Millisecond), fleetTTL)
	if detect > lostBy {
		t.Errorf("the loss took %v to record; the bound is %v", detect, lostBy)
	}
	if _, ok := members()[victim.id]; ok {
		t.Errorf("the killed node is still a member")
	}
	// Free room on the survivors, then new sessions land there only.
	for _, id := range perNode[nodes[0].id][:2] {
		call(nodes[1], http.MethodDelete, "/v1/sessions/"+id, "")
	}
	for _, id := range perNode[nodes[1].id][:2] {
		call(nodes[0], http.MethodDelete, "/v1/sessions/"+id, "")
	}
	testreq.Eventually(t, 20*time.Second, "new sessions on the survivors", func() bool {
		resp := call(nodes[0], http.MethodPost, "/v1/sessions", `{"image":"base","size":"small"}`)
		if resp.status == 201 && resp.header.Get(fleet.HeaderNode) == victim.id {
			t.Fatalf("a new session went to the killed node")
		}
		return resp.status == 201
	})
	// Its sandboxes outlived it; the node started again removes them
	// (the fleet no longer assigns it those sessions).
	left := runscProcesses(victim.dir, 0)
	start(victim)
	testreq.Eventually(t, time.Minute, "the restarted node removes its lost sessions' sandboxes", func() bool {
		return len(runscProcesses(victim.dir, victim.d.pid())) == 0
	})
	t.Logf("the killed node left %d sandbox processes; after its restart none", len(left))
	testreq.Eventually(t, 20*time.Second, "the restarted node is a member again", func() bool { _, ok := members()[victim.id]; return ok })

	// 5. Cut a node off from etcd past its TTL: the fleet marks its
	// sessions lost, the node destroys their sandboxes; etcd back, it
	// joins again as a new incarnation.
	cutNode := nodes[1]
	var cutSessions []string
	for _, id := range perNode[cutNode.id][2:] {
		cutSessions = append(cutSessions, id)
	}
	oldInc := members()[cutNode.id].Incarnation
	if len(runscProcesses(cutNode.dir, cutNode.d.pid())) == 0 {
		t.Fatalf("node %s runs no sandbox before the cut", cutNode.id)
	}
	cutNode.cut.cut()
	testreq.Eventually(t, fleetTTL+30*time.Second, "the cut-off node's sessions marked lost", func() bool {
		for _, id := range cutSessions {
			var s struct{ State string }
			json.Unmarshal(call(nodes[0], http.MethodGet, "/v1/sessions/"+id, "").body, &s)
			if s.State != "lost" {
				return false
			}
		}
		return true
	})
	testreq.Eventually(t, 30*time.Second, "the cut-off node destroys its sessions' sandboxes", func() bool {
		return len(runscProcesses(cutNode.dir, cutNode.d.pid())) == 0
	})
	cutNode.cut.restore()
	testreq.Eventually(t, 30*time.Second, "the node joins again as a new incarnation", func() bool {
		m, ok := members()[cutNode.id]
		return ok && m.Incarnation != oldInc
	})
	if !cutNode.d.running() {
		t.Fatalf("the cut-off node exited\n%s", cutNode.d.logs())
	}

	// Clean stops: every node ends its sessions and leaves.
	for _, n := range nodes {
		n.d.stop(t)
	}
	testreq.Eventually(t, 10*time.Second, "no member left", func() bool { return len(members()) == 0 })
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// TestBenchFleetRuns measures sustained one-shot runs per minute (bash
// echo, gVisor, cold start: no pool, no snapshots) for benchWindow, with
// as many clients as the members have run slots (fleetRuns each): a
// fleet of one node; one node of three (it places over all three and
// forwards); all three.
// All on this one machine, so the three nodes share its cores. For
// BENCHMARKS.md; run with AIRLOCK_BENCH_FLEET=1.
func TestBenchFleetRuns(t *testing.T) {
	if os.Getenv("AIRLOCK_BENCH_FLEET") == "" {
		t.Skip("set AIRLOCK_BENCH_FLEET=1 to measure (not a test)")
	}
	const benchWindow = 40 * time.Second
	tf := startTestFleet(t, fleetOptions{})
	load := func(via []*fleetNode, benchClients int) (perMin float64, failed int64, spread map[string]int) {
		var ok, bad atomic.Int64
		var mu sync.Mutex
		spread = map[string]int{}
		deadline := time.Now().Add(benchWindow)
		var wg sync.WaitGroup
		for c := 0; c < benchClients; c++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; time.Now().Before(deadline) && i < 10000; i++ {
					resp := tf.call(via[(c+i)%len(via)], http.MethodPost, "/v1/execute", `{"language":"bash","code":"echo bench"}`)
					if resp.status != 200 {
						bad.Add(1)
						continue
					}
					ok.Add(1)
					mu.Lock()
					spread[resp.header.Get(fleet.HeaderNode)]++
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		return float64(ok.Load()) / benchWindow.Minutes(), bad.Load(), spread
	}
	n0, rest := tf.nodes[0], tf.nodes[1:]
	for _, n := range rest {
		n.d.stop(t)
	}
	testreq.Eventually(t, 20*time.Second, "one member", func() bool { return len(tf.members()) == 1 })
	one, bad1, s1 := load([]*fleetNode{n0}, fleetRuns)
	for _, n := range rest {
		tf.start(n)
	}
	testreq.Eventually(t, 20*time.Second, "three members", func() bool { return len(tf.members()) == 3 })
	via1, bad2, s2 := load([]*fleetNode{n0}, fleetNodes*fleetRuns)
	all, bad3, s3 := load(tf.nodes, fleetNodes*fleetRuns)
	t.Logf("runs/min over %v: one-node fleet, %d clients: %.0f (refused %d, ran on %v); through one node of three, %d clients: %.0f (refused %d, ran on %v); through all three, %d clients: %.0f (refused %d, ran on %v)",
		benchWindow, fleetRuns, one, bad1, s1, fleetNodes*fleetRuns, via1, bad2, s2, fleetNodes*fleetRuns, all, bad3, s3)
}
