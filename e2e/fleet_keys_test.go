package e2e_test

import (
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestFleetKeys checks the control plane across a fleet of three nodes
// on one PostgreSQL store: a tenant and a key made through one node's
// admin API work on every node; the key revoked through another node is
// refused (401) by every node within 2 s; and the CLI's admin commands,
// pointed at any node with an operator key, list and revoke on the
// PostgreSQL fleet with no shell on its nodes.
func TestFleetKeys(t *testing.T) {
	tf := startTestFleet(t, fleetOptions{})
	admin := tf.nodes[0].adminKey()
	n0, n1, n2 := tf.nodes[0], tf.nodes[1], tf.nodes[2]

	if r := send(t, "POST", n1.url()+"/v1/admin/tenants", admin, strings.NewReader(`{"name":"fleet-keys"}`)); r.status != http.StatusCreated {
		t.Fatalf("create tenant through n1: %d %s", r.status, r.body)
	}
	r := send(t, "POST", n2.url()+"/v1/admin/tenants/fleet-keys/keys", admin, strings.NewReader(`{"name":"agent"}`))
	var made struct {
		KeyID string `json:"key_id"`
		Key   string `json:"key"`
	}
	if r.status != http.StatusCreated || json.Unmarshal(r.body, &made) != nil || made.Key == "" || made.KeyID == "" {
		t.Fatalf("create key through n2: %d %s", r.status, r.body)
	}
	// A tenant key never opens the admin API, on any node.
	for _, n := range tf.nodes {
		send(t, "GET", n.url()+"/v1/admin/tenants", made.Key, nil).problem(t, http.StatusForbidden)
		if r := send(t, "GET", n.url()+"/v1/executions", made.Key, nil); r.status != http.StatusOK {
			t.Fatalf("%s: the new key: %d %s", n.id, r.status, r.body)
		}
	}

	// The CLI against a node of the PostgreSQL fleet, with the operator
	// key from the environment.
	cli := buildCLI(t, t.TempDir())
	runCLI := func(n *fleetNode, args ...string) string {
		t.Helper()
		cmd := exec.Command(cli, append([]string{"admin"}, args...)...)
		cmd.Env = append(os.Environ(), "AIRLOCK_URL="+n.url(), "AIRLOCK_ADMIN_KEY="+admin, "HOME="+t.TempDir())
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("airlock admin %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	if out := runCLI(n2, "tenant", "ls"); !strings.Contains(out, "fleet-keys") {
		t.Fatalf("airlock admin tenant ls through n2 does not list fleet-keys:\n%s", out)
	}
	if out := runCLI(n1, "key", "ls", "fleet-keys"); !strings.Contains(out, made.KeyID) {
		t.Fatalf("airlock admin key ls through n1 does not list %s:\n%s", made.KeyID, out)
	}

	// Revoked through n0 with the CLI: every node refuses it within 2 s.
	runCLI(n0, "key", "revoke", made.KeyID)
	revoked := time.Now()
	for _, n := range tf.nodes {
		for {
			r := send(t, "GET", n.url()+"/v1/executions", made.Key, nil)
			if r.status == http.StatusUnauthorized {
				break
			}
			if time.Since(revoked) > 2*time.Second {
				t.Fatalf("%s still takes the revoked key %s after %v: %d", n.id, made.KeyID, time.Since(revoked), r.status)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	t.Logf("every node refused the revoked key %v after the revocation", time.Since(revoked))

	// The audit log, read through any node, records it.
	r = send(t, "GET", n2.url()+"/v1/admin/audit", admin, nil)
	if r.status != http.StatusOK || !strings.Contains(string(r.body), made.KeyID) {
		t.Fatalf("the audit log through n2 does not name %s: %d %s", made.KeyID, r.status, r.body)
	}
}
