package e2e_test

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestAirlockdKeys checks keys through a real airlockd: the first start
// writes admin.key (mode 0600); the operator makes a tenant and a key
// through the admin API; the key works on REST, MCP, the E2B API, the E2B
// data plane (the sandbox's envd token) and its signed artifact URL; once
// revoked, every one of them refuses it within 2 s; the audit log names
// who did what.
func TestAirlockdKeys(t *testing.T) {
	n, d := startNode(t, nodeOptions{name: "keys"}, quiet...)
	tmp := n.dir
	fi, err := os.Stat(filepath.Join(tmp, "admin.key"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("admin.key: %v, mode %v", err, fi)
	}
	admin, defaultKey := n.adminKey(), n.key()

	// Roles: the operator key opens the admin API only, a tenant's key
	// never does.
	send(t, "GET", d.url+"/v1/admin/tenants", defaultKey, nil).problem(t, http.StatusForbidden)
	send(t, "GET", d.url+"/v1/executions", admin, nil).problem(t, http.StatusForbidden)
	if r := send(t, "POST", d.url+"/v1/admin/tenants", admin, strings.NewReader(`{"name":"acme"}`)); r.status != 201 {
		t.Fatalf("create tenant: %d %s", r.status, r.body)
	}
	r := send(t, "POST", d.url+"/v1/admin/tenants/acme/keys", admin, strings.NewReader(`{"name":"agent"}`))
	var made struct {
		KeyID string `json:"key_id"`
		Key   string `json:"key"`
	}
	if r.status != 201 || json.Unmarshal(r.body, &made) != nil || made.Key == "" {
		t.Fatalf("create key: %d %s", r.status, r.body)
	}
	key := made.Key

	// The key at work on every surface.
	r = send(t, "POST", d.url+"/v1/execute", key, strings.NewReader(`{"language":"bash","code":"echo hi > out.txt","timeout_sec":15}`))
	var exe struct {
		Artifacts []struct {
			URL string `json:"url"`
		} `json:"artifacts"`
	}
	if r.status != 200 || json.Unmarshal(r.body, &exe) != nil || len(exe.Artifacts) != 1 {
		t.Fatalf("execute: %d %s", r.status, r.body)
	}
	link := exe.Artifacts[0].URL
	r = send(t, "POST", d.url+"/sandboxes", key, strings.NewReader(`{"templateID":"base","timeout":120}`))
	var sbx struct {
		SandboxID       string `json:"sandboxID"`
		EnvdAccessToken string `json:"envdAccessToken"`
	}
	if r.status != 201 || json.Unmarshal(r.body, &sbx) != nil || sbx.EnvdAccessToken == "" {
		t.Fatalf("E2B create: %d %s", r.status, r.body)
	}
	health := func() int {
		req, _ := http.NewRequest("GET", d.url+"/health", nil)
		req.Header.Set("E2b-Sandbox-Id", sbx.SandboxID)
		req.Header.Set("E2b-Sandbox-Port", "49983")
		req.Header.Set("X-Access-Token", sbx.EnvdAccessToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	mcpInit := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"e2e","version":"1"}}}`
	mcp := func() int {
		req, _ := http.NewRequest("POST", d.url+"/mcp", strings.NewReader(mcpInit))
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	surfaces := map[string]func() int{
		"REST":            func() int { return send(t, "GET", d.url+"/v1/executions", key, nil).status },
		"E2B API":         func() int { return send(t, "GET", d.url+"/sandboxes/"+sbx.SandboxID, key, nil).status },
		"E2B envd token":  health,
		"MCP":             mcp,
		"artifact URL":    func() int { return send(t, "GET", link, "", nil).status },
		"own keys (REST)": func() int { return send(t, "GET", d.url+"/v1/keys", key, nil).status },
	}
	for name, f := range surfaces {
		if c := f(); c/100 != 2 {
			t.Fatalf("%s with a live key: %d", name, c)
		}
	}

	// Revoked: every surface refuses it within 2 s.
	if r := send(t, "DELETE", d.url+"/v1/admin/keys/"+made.KeyID, admin, nil); r.status != 200 {
		t.Fatalf("revoke: %d %s", r.status, r.body)
	}
	revoked := time.Now()
	for name, f := range surfaces {
		for {
			c := f()
			if c == http.StatusUnauthorized {
				break
			}
			if time.Since(revoked) > 2*time.Second {
				t.Errorf("%s still answers %d more than 2 s after the key was revoked", name, c)
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	// The default tenant's key is untouched.
	if c := send(t, "GET", d.url+"/v1/executions", defaultKey, nil).status; c != 200 {
		t.Errorf("another key after the revocation: %d", c)
	}

	// The audit log: who (the bootstrap operator key), what, the result.
	r = send(t, "GET", d.url+"/v1/admin/audit", admin, nil)
	var audit struct {
		Entries []struct {
			KeyName string `json:"key_name"`
			Action  string `json:"action"`
			Result  string `json:"result"`
		} `json:"entries"`
	}
	if r.status != 200 || json.Unmarshal(r.body, &audit) != nil {
		t.Fatalf("audit: %d %s", r.status, r.body)
	}
	seen := map[string]bool{}
	for _, e := range audit.Entries {
		if e.KeyName == "bootstrap" && e.Result == "ok" {
			seen[e.Action] = true
		}
	}
	for _, a := range []string{"tenant.create", "key.create", "key.revoke"} {
		if !seen[a] {
			t.Errorf("no audit entry %s by the bootstrap key: %s", a, r.body)
		}
	}
}
