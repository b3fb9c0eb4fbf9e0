package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/airlockhq/airlock/fleet"
	"github.com/airlockhq/airlock/internal/testenv/testreq"
)

// TestFleetQuotas checks that a tenant's quotas hold across the whole
// fleet (three nodes, one PostgreSQL, one etcd): sessions asked of all
// three nodes at once stop at the session quota; executions per minute
// and sandbox-seconds per day are refused on every node once the fleet
// as a whole used them; a node cut off from etcd refuses new work with a
// 503 and Retry-After, and the tenant's live sessions never go past its
// quota meanwhile.
func TestFleetQuotas(t *testing.T) {
	const quotaSessions = 4
	tf := startTestFleet(t, fleetOptions{extra: []string{"--quota", fmt.Sprintf("sessions=%d", quotaSessions), "--quota-flush", "1s"}})
	nodes := tf.nodes
	ctx := context.Background()
	db, err := pgx.Connect(ctx, tf.pg.DSN("airlock"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(ctx)
	var tenantID string
	if err := db.QueryRow(ctx, `SELECT id FROM tenants WHERE name = 'default'`).Scan(&tenantID); err != nil {
		t.Fatal(err)
	}
	liveSessions := func() int {
		var n int
		if err := db.QueryRow(ctx, `SELECT count(*) FROM sessions WHERE tenant_id = $1 AND state IN ('creating', 'ready', 'busy')`, tenantID).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	setQuota := func(k string, v int64) {
		t.Helper()
		if _, err := db.Exec(ctx, `INSERT INTO tenant_quotas (tenant_id, quota, limit_val, updated_at) VALUES ($1, $2, $3, 0)
			ON CONFLICT (tenant_id, quota) DO UPDATE SET limit_val = EXCLUDED.limit_val`, tenantID, k, v); err != nil {
			t.Fatal(err)
		}
		// Every node reads the overrides again at its flush (1 s).
		testreq.Eventually(t, 15*time.Second, "every node applies "+k, func() bool {
			for _, n := range nodes {
				if q := fleetUsage(tf, n, k); q.Limit != v {
					return false
				}
			}
			return true
		})
	}

	// 1. Three times the quota asked through the three nodes at once:
	// exactly the quota is made, the rest refused by the session quota.
	type made struct{ id, node string }
	var sessions []made
	var mu sync.Mutex
	var wg sync.WaitGroup
	refusedBy := map[string]int{}
	for i := 0; i < 3*quotaSessions; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp := tf.call(nodes[i%fleetNodes], http.MethodPost, "/v1/sessions", `{"image":"base","size":"small","timeout_s":900}`)
			mu.Lock()
			defer mu.Unlock()
			switch resp.status {
			case http.StatusCreated:
				var s struct {
					ID string `json:"session_id"`
				}
				json.Unmarshal(resp.body, &s)
				sessions = append(sessions, made{s.ID, resp.header.Get(fleet.HeaderNode)})
			case http.StatusTooManyRequests:
				var p struct{ Type, Quota string }
				json.Unmarshal(resp.body, &p)
				refusedBy[p.Quota]++
				if resp.header.Get("Retry-After") == "" {
					t.Errorf("a 429 without Retry-After: %s", resp.body)
				}
			default:
				t.Errorf("create session: %d %s", resp.status, resp.body)
			}
		}()
	}
	wg.Wait()
	spread := map[string]int{}
	for _, s := range sessions {
		spread[s.node]++
	}
	t.Logf("%d sessions asked through %d nodes at once, quota %d: %d made (on %v), refused %v", 3*quotaSessions, fleetNodes, quotaSessions, len(sessions), spread, refusedBy)
	if len(sessions) != quotaSessions || refusedBy["sessions"] != 2*quotaSessions {
		t.Fatalf("%d made and %v refused; want %d made and %d refused by the session quota", len(sessions), refusedBy, quotaSessions, 2*quotaSessions)
	}
	if n := liveSessions(); n != quotaSessions {
		t.Errorf("the store has %d live sessions of the tenant, quota %d", n, quotaSessions)
	}
	for _, n := range nodes {
		if q := fleetUsage(tf, n, "sessions"); q.Used != quotaSessions {
			t.Errorf("GET /v1/usage on %s: %d sessions used, want %d", n.id, q.Used, quotaSessions)
		}
	}
	// One more through every node: refused.
	for _, n := range nodes {
		if resp := tf.call(n, http.MethodPost, "/v1/sessions", `{"image":"base","size":"small"}`); resp.status != http.StatusTooManyRequests {
			t.Errorf("a session past the quota through %s: %d %s", n.id, resp.status, clip(string(resp.body), 200))
		}
	}

	// 2. Executions per minute: five in a session through the three
	// nodes in turn, then refused through every node.
	setQuota("executions_per_minute", 5)
	target := sessions[0]
	var ran, rateRefused int
	for i := 0; i < 8; i++ {
		resp := tf.call(nodes[i%fleetNodes], http.MethodPost, "/v1/sessions/"+target.id+"/exec", `{"shell":"echo x"}`)
		switch resp.status {
		case http.StatusOK:
			ran++
		case http.StatusTooManyRequests:
			var p struct{ Quota string }
			json.Unmarshal(resp.body, &p)
			if p.Quota != "executions_per_minute" {
				t.Errorf("exec %d refused by %q: %s", i, p.Quota, resp.body)
			}
			rateRefused++
		default:
			t.Errorf("exec %d: %d %s", i, resp.status, resp.body)
		}
	}
	if ran != 5 || rateRefused != 3 {
		t.Errorf("8 execs through 3 nodes at 5 a minute: %d ran, %d refused", ran, rateRefused)
	}
	for _, n := range nodes {
		resp := tf.call(n, http.MethodPost, "/v1/execute", `{"language":"bash","code":"echo run"}`)
		if resp.status != http.StatusTooManyRequests {
			t.Errorf("a run through %s past the rate: %d %s", n.id, resp.status, clip(string(resp.body), 200))
		}
	}
	setQuota("executions_per_minute", -1)

	// 3. Sandbox-seconds per day: the four live sessions use the day's
	// allowance; then every node refuses runs.
	used := fleetUsage(tf, nodes[0], "sandbox_seconds_per_day").Used
	setQuota("sandbox_seconds_per_day", used+8)
	testreq.Eventually(t, 30*time.Second, "every node refuses runs past the day's sandbox-seconds", func() bool {
		for _, n := range nodes {
			resp := tf.call(n, http.MethodPost, "/v1/execute", `{"language":"bash","code":"echo run"}`)
			var p struct{ Quota string }
			json.Unmarshal(resp.body, &p)
			if resp.status != http.StatusTooManyRequests || p.Quota != "sandbox_seconds_per_day" {
				return false
			}
		}
		return true
	})
	setQuota("sandbox_seconds_per_day", -1)

	// 4. A node cut off from etcd (the shared counters) refuses new work
	// in its session with a 503 and Retry-After; the others go on, and
	// the tenant's live sessions never pass the quota.
	var cutNode *fleetNode
	var cutSession string
	for _, s := range sessions {
		for _, n := range nodes {
			if n.id == s.node && cutNode == nil {
				cutNode, cutSession = n, s.id
			}
		}
	}
	for _, s := range sessions[1:] {
		if s.id != cutSession {
			tf.call(nodes[0], http.MethodDelete, "/v1/sessions/"+s.id, "")
		}
	}
	testreq.Eventually(t, 20*time.Second, "one session left", func() bool { return liveSessions() == 1 })
	cutNode.cut.cut()
	resp := tf.call(cutNode, http.MethodPost, "/v1/sessions/"+cutSession+"/exec", `{"shell":"echo x"}`)
	var p struct{ Type string }
	json.Unmarshal(resp.body, &p)
	if resp.status != http.StatusServiceUnavailable || resp.header.Get("Retry-After") == "" {
		t.Errorf("an exec on the cut-off node: %d (Retry-After %q) %s", resp.status, resp.header.Get("Retry-After"), resp.body)
	}
	t.Logf("the cut-off node %s answered an exec with %d %s", cutNode.id, resp.status, p.Type)
	others := []*fleetNode{}
	for _, n := range nodes {
		if n != cutNode {
			others = append(others, n)
		}
	}
	most := 0
	deadline := time.Now().Add(fleetTTL + 10*time.Second)
	for i := 0; time.Now().Before(deadline); i++ {
		// Bursts through the others, more than the quota has room for.
		var bw sync.WaitGroup
		for j := 0; j < quotaSessions; j++ {
			bw.Add(1)
			go func() {
				defer bw.Done()
				tf.call(others[(i+j)%len(others)], http.MethodPost, "/v1/sessions", `{"image":"base","size":"small"}`)
			}()
		}
		bw.Wait()
		n := liveSessions()
		most = max(most, n)
		if n > quotaSessions {
			t.Fatalf("%d live sessions of the tenant with a node cut off; quota %d", n, quotaSessions)
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("with %s cut off: at most %d live sessions of the tenant (quota %d)", cutNode.id, most, quotaSessions)
	cutNode.cut.restore()
	testreq.Eventually(t, 30*time.Second, "the node back reads the fleet's counters", func() bool {
		return tf.call(cutNode, http.MethodGet, "/v1/usage", "").status == http.StatusOK
	})
}

// quotaUse is one quota of GET /v1/usage.
type quotaUse struct {
	Quota string `json:"quota"`
	Limit int64  `json:"limit"`
	Used  int64  `json:"used"`
}

func fleetUsage(tf *testFleet, n *fleetNode, k string) quotaUse {
	tf.t.Helper()
	resp := tf.call(n, http.MethodGet, "/v1/usage", "")
	var u struct {
		Quotas []quotaUse `json:"quotas"`
	}
	json.Unmarshal(resp.body, &u)
	for _, q := range u.Quotas {
		if q.Quota == k {
			return q
		}
	}
	return quotaUse{Limit: -2, Used: -1}
}
