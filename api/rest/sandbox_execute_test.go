package rest_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/airlockhq/airlock"
)

// POST /v1/sandbox/execute takes the reference blueprint's request and
// answers with (at least) the blueprint's response fields, like
// /v1/execute.
func TestSandboxExecute(t *testing.T) {
	e := newEnv(t)
	e.exec.setFiles(testFile{"output.png", "image/png", "\x89PNG\r\n\x1a\n"})
	body := `{"language": "python", "code": "import matplotlib.pyplot as plt\nplt.savefig('output.png')", "timeout_sec": 15, "allow_network": false}`
	resp := e.do(req{method: "POST", path: "/v1/sandbox/execute", key: e.keyA, body: body,
		header: map[string]string{"Content-Type": "application/json", "X-Agent-Id": "agent-7"}})
	var m map[string]any
	decodeJSON(t, resp, http.StatusOK, &m)
	for _, f := range []string{"exit_code", "stdout", "stderr", "duration_ms", "peak_memory_mb", "artifacts"} {
		if _, ok := m[f]; !ok {
			t.Errorf("response has no %q: %v", f, m)
		}
	}
	arts, _ := m["artifacts"].([]any)
	if len(arts) != 1 {
		t.Fatalf("artifacts %v", m["artifacts"])
	}
	a := arts[0].(map[string]any)
	if a["filename"] != "output.png" || a["size_bytes"] != float64(8) || !strings.HasPrefix(a["url"].(string), e.srv.URL+"/v1/artifacts/") {
		t.Errorf("artifact %v", a)
	}
	call := e.exec.lastCall()
	want := airlock.ExecuteRequest{Language: airlock.Python, Code: "import matplotlib.pyplot as plt\nplt.savefig('output.png')", TimeoutSec: 15}
	if call.req != want || call.agentID != "agent-7" || call.tenant.ID != e.tenantA.ID {
		t.Errorf("executor got %+v from agent %q", call.req, call.agentID)
	}

	// The same run on /v1/execute answers with the same members.
	var m2 map[string]any
	decodeJSON(t, e.do(req{method: "POST", path: "/v1/execute", key: e.keyA, body: body,
		header: map[string]string{"X-Agent-Id": "agent-7"}}), http.StatusOK, &m2)
	for k := range m {
		if _, ok := m2[k]; !ok {
			t.Errorf("/v1/execute has no %q", k)
		}
	}
	for k := range m2 {
		if _, ok := m[k]; !ok {
			t.Errorf("/v1/sandbox/execute has no %q", k)
		}
	}
}

// The reference route refuses what /v1/execute refuses, and what its
// shape does not have.
func TestSandboxExecuteProblems(t *testing.T) {
	e := newEnv(t)
	json := map[string]string{"Content-Type": "application/json"}
	for _, tt := range []struct {
		name, key, body string
		header          map[string]string
		status          int
		slug            string
	}{
		{"no key", "", okBody, json, 401, "unauthorized"},
		{"text/plain", "A", okBody, map[string]string{"Content-Type": "text/plain"}, 415, "unsupported-media-type"},
		{"unknown language", "A", `{"language":"cobol","code":"x"}`, json, 400, "unknown-language"},
		{"missing language", "A", `{"code":"x"}`, json, 400, "missing-language"},
		{"timeout too long", "A", `{"language":"python","code":"x","timeout_sec":31}`, json, 400, "timeout-out-of-range"},
		{"image", "A", `{"language":"python","code":"x","image":"base"}`, json, 400, "unknown-field"},
		{"network refused", "A", `{"language":"python","code":"x","allow_network":true}`, json, 403, "network-unavailable"},
		{"agent id", "A", okBody, map[string]string{"X-Agent-Id": strings.Repeat("a", 201)}, 400, "invalid-agent-id"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e.t = t
			key := tt.key
			if key == "A" {
				key = e.keyA
			}
			wantProblem(t, e.do(req{method: "POST", path: "/v1/sandbox/execute", key: key, body: tt.body, header: tt.header}), tt.status, tt.slug)
		})
	}
}
