package e2b_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"mime/multipart"
	"strings"
	"testing"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/teststack"
	"github.com/airlockhq/airlock/service/provision"
)

// apiErr is the {code, message} body of the control plane and envd's
// HTTP endpoints.
type apiErr struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

// connectErr is a Connect error body.
type connectErr struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// TestHostileInput sends what a confused or hostile client might to every
// kind of endpoint, and checks each gets a clear error in the shape its
// SDK reads (and that the server goes on serving).
func TestHostileInput(t *testing.T) {
	n := newNode(t)
	s := n.create(t, n.keyA, `{"templateID":"base"}`)
	other := n.create(t, n.keyB, `{"templateID":"base"}`)
	key := map[string]string{"X-API-KEY": n.keyA}

	// Control plane: {code, message} with the status as code.
	for _, c := range []struct {
		name, method, path string
		header             map[string]string
		body               string
		status             int
	}{
		{"no key", "GET", "/v2/sandboxes", nil, "", 401},
		{"wrong key", "GET", "/v2/sandboxes", map[string]string{"X-API-KEY": "e2b_0000"}, "", 401},
		{"bad JSON", "POST", "/v2/sandboxes", key, `{"templateID":`, 400},
		{"wrong JSON type", "POST", "/sandboxes", key, `{"templateID":7}`, 400},
		{"huge body", "POST", "/sandboxes", key, `{"metadata":{"a":"` + strings.Repeat("x", 2<<20) + `"}}`, 413},
		{"unknown template", "POST", "/v2/sandboxes", key, `{"templateID":"no-such"}`, 404},
		{"NUL in metadata", "POST", "/v2/sandboxes", key, `{"metadata":{"a\u0000":"b"}}`, 400},
		{"bad env name", "POST", "/v2/sandboxes", key, `{"envVars":{"1X":"b"}}`, 400},
		{"an address in allowOut", "POST", "/v2/sandboxes", key, `{"network":{"allowOut":["10.0.0.1"]}}`, 400},
		{"mcp", "POST", "/v2/sandboxes", key, `{"mcp":{"x":{}}}`, 400},
		{"another tenant's sandbox", "GET", "/sandboxes/" + other.SandboxID, key, "", 404},
		{"kill another tenant's", "DELETE", "/sandboxes/" + other.SandboxID, key, "", 404},
		{"timeout of another tenant's", "POST", "/sandboxes/" + other.SandboxID + "/timeout", key, `{"timeout":5}`, 404},
		{"no such sandbox", "POST", "/v2/sandboxes/nope/connect", key, `{}`, 404},
		{"timeout without timeout", "POST", "/sandboxes/" + s.SandboxID + "/timeout", key, `{}`, 400},
		{"pause", "POST", "/sandboxes/" + s.SandboxID + "/pause", key, "", 501},
		{"metrics of another tenant's", "GET", "/sandboxes/" + other.SandboxID + "/metrics", key, "", 404},
		{"metrics with a bad start", "GET", "/sandboxes/" + s.SandboxID + "/metrics?start=yesterday", key, "", 400},
		{"templates", "GET", "/templates", key, "", 501},
		{"wrong method", "PATCH", "/sandboxes", key, "", 405},
		{"deep path", "GET", "/sandboxes/a/b/c/d", key, "", 404},
		{"bad limit", "GET", "/v2/sandboxes?limit=-1", key, "", 400},
		{"bad metadata filter", "GET", "/v2/sandboxes?metadata=a%3D%25zz%3B", key, "", 400},
	} {
		r := n.do(t, c.method, c.path, c.header, strings.NewReader(c.body))
		var e apiErr
		if err := json.Unmarshal(r.body, &e); err != nil || r.status != c.status || e.Code != c.status || e.Message == "" {
			t.Errorf("%s: %d %.200s, want %d with {code, message}", c.name, r.status, r.body, c.status)
		}
	}

	// Envd over HTTP: {code, message}.
	envd := s.envd()
	for _, c := range []struct {
		name, method, path string
		header             map[string]string
		body               string
		status             int
	}{
		{"no sandbox ID", "GET", "/files?path=x", map[string]string{"X-Access-Token": s.EnvdAccessToken}, "", 400},
		{"no token", "GET", "/files?path=x", map[string]string{"E2b-Sandbox-Id": s.SandboxID}, "", 401},
		{"another sandbox's token", "GET", "/files?path=x", other.envd("E2b-Sandbox-Id", s.SandboxID), "", 401},
		{"the traffic token on envd", "GET", "/files?path=x", s.envd("X-Access-Token", s.TrafficAccessToken), "", 401},
		{"no path", "GET", "/files", envd, "", 400},
		{"missing file", "GET", "/files?path=nope", envd, "", 404},
		{"a directory", "GET", "/files?path=%2Fhome%2Fuser", envd, "", 400},
		{"outside the roots", "GET", "/files?path=%2Fetc%2Fpasswd", envd, "", 403},
		{"dot-dot", "GET", "/files?path=..%2F..%2Fetc%2Fpasswd", envd, "", 403},
		{"unknown user", "GET", "/files?path=x&username=admin", envd, "", 401},
		{"signed URL", "GET", "/files?path=x&signature=v1_abc", nil, "", 501},
		{"raw upload without path", "POST", "/files", s.envd("Content-Type", "application/octet-stream"), "x", 400},
		{"unknown encoding", "POST", "/files?path=x", s.envd("Content-Encoding", "br"), "x", 415},
		{"not gzip", "POST", "/files?path=x", s.envd("Content-Encoding", "gzip"), "plain", 400},
		{"multipart without boundary", "POST", "/files", s.envd("Content-Type", "multipart/form-data"), "x", 400},
		{"malformed multipart", "POST", "/files", s.envd("Content-Type", "multipart/form-data; boundary=zz"), "--zz\r\nbroken", 400},
		{"upload to the home itself", "POST", "/files?path=%2Fhome%2Fuser", s.envd("Content-Type", "application/octet-stream"), "x", 400},
		{"wrong method", "PUT", "/files", envd, "", 405},
		{"unknown envd path", "GET", "/nope", envd, "", 404},
		{"a user port", "GET", "/", s.envd("E2b-Sandbox-Port", "8080"), "", 502},
		{"interpreter without token", "GET", "/contexts", map[string]string{"E2b-Sandbox-Id": s.SandboxID, "E2b-Sandbox-Port": "49999"}, "", 401},
		{"execute with the traffic token alone", "POST", "/execute", trafficOnly(s.interp()), `{"code":"1"}`, 401},
		{"execute with the traffic token as X-Access-Token", "POST", "/execute", s.interp("X-Access-Token", s.TrafficAccessToken), `{"code":"1"}`, 401},
		{"execute bad JSON", "POST", "/execute", s.interp(), `{"code":`, 400},
		{"execute without code", "POST", "/execute", s.interp(), `{}`, 400},
		{"execute context and language", "POST", "/execute", s.interp(), `{"code":"1","context_id":"x","language":"python"}`, 400},
		{"execute unknown language", "POST", "/execute", s.interp(), `{"code":"1","language":"cobol"}`, 400},
		{"execute unknown context", "POST", "/execute", s.interp(), `{"code":"1","context_id":"ctx-nope"}`, 404},
		{"execute env_vars", "POST", "/execute", s.interp(), `{"code":"1","env_vars":{"A":"1"}}`, 400},
		{"execute huge", "POST", "/execute", s.interp(), `{"code":"` + strings.Repeat("x", airlock.MaxCodeBytes+100<<10) + `"}`, 413},
		{"context with a bad cwd", "POST", "/contexts", s.interp(), `{"cwd":"/etc"}`, 403},
		{"delete an unknown context", "DELETE", "/contexts/ctx-nope", s.interp(), "", 404},
	} {
		r := n.do(t, c.method, c.path, c.header, strings.NewReader(c.body))
		var e apiErr
		if err := json.Unmarshal(r.body, &e); err != nil || r.status != c.status || e.Code != c.status || e.Message == "" {
			t.Errorf("%s: %d %.200s, want %d with {code, message}", c.name, r.status, r.body, c.status)
		}
	}

	// A multipart part without a filename, and one with no file part.
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	fw, _ := mw.CreateFormField("file")
	fw.Write([]byte("x"))
	mw.Close()
	if r := n.do(t, "POST", "/files", s.envd("Content-Type", mw.FormDataContentType()), &body); r.status != 400 {
		t.Errorf("a file part without a filename: %d %s", r.status, r.body)
	}

	// Connect, unary: errors as {"code": "<connect code>", "message"}.
	for _, c := range []struct {
		name, procedure string
		header          map[string]string
		body            string
		status          int
		code            string
	}{
		{"garbage JSON", "/filesystem.Filesystem/Stat", s.envd(), `{"path":`, 400, "invalid_argument"},
		{"unknown field (ignored, as E2B does)", "/filesystem.Filesystem/Stat", s.envd(), `{"path":"x","nope":1}`, 404, "not_found"},
		{"wrong token", "/filesystem.Filesystem/Stat", s.envd("X-Access-Token", "x"), `{"path":"x"}`, 401, "unauthenticated"},
		{"another sandbox's token", "/filesystem.Filesystem/Stat", other.envd("E2b-Sandbox-Id", s.SandboxID), `{"path":"x"}`, 401, "unauthenticated"},
		{"no sandbox ID", "/filesystem.Filesystem/Stat", map[string]string{"X-Access-Token": s.EnvdAccessToken}, `{"path":"x"}`, 400, "invalid_argument"},
		{"unknown user", "/filesystem.Filesystem/Stat", s.envd("Authorization", "Basic YWRtaW46"), `{"path":"x"}`, 401, "unauthenticated"},
		{"bad basic auth", "/filesystem.Filesystem/Stat", s.envd("Authorization", "Basic !!!"), `{"path":"x"}`, 401, "unauthenticated"},
		{"missing file", "/filesystem.Filesystem/Stat", s.envd(), `{"path":"nope"}`, 404, "not_found"},
		{"outside the roots", "/filesystem.Filesystem/Stat", s.envd(), `{"path":"/etc/passwd"}`, 403, "permission_denied"},
		{"move out of the roots", "/filesystem.Filesystem/Move", s.envd(), `{"source":"a","destination":"/etc/a"}`, 403, "permission_denied"},
		{"mkdir twice", "/filesystem.Filesystem/MakeDir", s.envd(), `{"path":"/home/user"}`, 409, "already_exists"},
		{"remove the home", "/filesystem.Filesystem/Remove", s.envd(), `{"path":"/home/user"}`, 400, "invalid_argument"},
		{"kill an unknown pid", "/process.Process/SendSignal", s.envd(), `{"process":{"pid":99999},"signal":"SIGNAL_SIGKILL"}`, 404, "not_found"},
		{"no selector", "/process.Process/SendSignal", s.envd(), `{"signal":"SIGNAL_SIGKILL"}`, 400, "invalid_argument"},
		{"no signal", "/process.Process/SendSignal", s.envd(), `{"process":{"pid":1}}`, 400, "invalid_argument"},
		{"stdin to an unknown pid", "/process.Process/SendInput", s.envd(), `{"process":{"pid":99999},"input":{"stdin":"eA=="}}`, 404, "not_found"},
		{"pty input", "/process.Process/SendInput", s.envd(), `{"process":{"pid":1},"input":{"pty":"eA=="}}`, 404, "not_found"},
		{"update without a selector", "/process.Process/Update", s.envd(), `{}`, 400, "invalid_argument"},
		{"update of no terminal", "/process.Process/Update", s.envd(), `{"process":{"pid":1},"pty":{"size":{"cols":80,"rows":24}}}`, 404, "not_found"},
		{"create watcher", "/filesystem.Filesystem/CreateWatcher", s.envd(), `{"path":"x"}`, 501, "unimplemented"},
		{"unknown procedure", "/process.Process/Nope", s.envd(), `{}`, 404, ""},
	} {
		r := n.connectUnary(t, c.procedure, c.header, c.body)
		var e connectErr
		if c.code == "" {
			if r.status != c.status {
				t.Errorf("%s: %d %.200s, want %d", c.name, r.status, r.body, c.status)
			}
			continue
		}
		if err := json.Unmarshal(r.body, &e); err != nil || r.status != c.status || e.Code != c.code || e.Message == "" {
			t.Errorf("%s: %d %.200s, want %d %s", c.name, r.status, r.body, c.status, c.code)
		}
	}

	// Connect, streaming: HTTP 200 and the error in the end-stream
	// message, whatever the envelope.
	stream := func(name string, h map[string]string, raw []byte, code string) {
		t.Helper()
		h["Content-Type"] = "application/connect+json"
		h["Connect-Protocol-Version"] = "1"
		r := n.do(t, "POST", "/process.Process/Start", h, bytes.NewReader(raw))
		if r.status != 200 {
			t.Errorf("%s: status %d %.200s", name, r.status, r.body)
			return
		}
		_, end := envelopes(t, r.body)
		var e struct{ Error connectErr }
		if err := json.Unmarshal(end, &e); err != nil || e.Error.Code == "" || code != "" && e.Error.Code != code {
			t.Errorf("%s: end %s, want %s", name, end, code)
		}
	}
	huge := make([]byte, 5)
	binary.BigEndian.PutUint32(huge[1:], 1<<30)
	stream("envelope longer than the body", s.envd(), append(huge, '{', '}'), "resource_exhausted")
	stream("truncated envelope", s.envd(), []byte{0, 0, 0, 0, 9, '{'}, "")
	stream("compressed flag without compression", s.envd(), envelope(1, []byte(`{}`)), "internal")
	stream("not JSON", s.envd(), envelope(0, []byte(`{{`)), "invalid_argument")
	stream("no command", s.envd(), envelope(0, []byte(`{"process":{}}`)), "invalid_argument")
	stream("a PTY of no size", s.envd(), envelope(0, []byte(`{"process":{"cmd":"bash"},"pty":{"size":{"cols":0,"rows":24}}}`)), "invalid_argument")
	stream("a PTY too large", s.envd(), envelope(0, []byte(`{"process":{"cmd":"bash"},"pty":{"size":{"cols":80,"rows":100000}}}`)), "invalid_argument")
	stream("NUL in an argument", s.envd(), envelope(0, []byte(`{"process":{"cmd":"echo","args":["a\u0000b"]}}`)), "invalid_argument")
	stream("cwd outside the roots", s.envd(), envelope(0, []byte(`{"process":{"cmd":"pwd","cwd":"/etc"}}`)), "permission_denied")
	stream("wrong token", s.envd("X-Access-Token", "nope"), envelope(0, []byte(`{"process":{"cmd":"true"}}`)), "unauthenticated")
	stream("a selector instead of a config", s.envd(), envelope(0, []byte(`{"process":{"pid":99999}}`)), "invalid_argument")

	// Connect to a process that is not running.
	if status, _, end := n.connectStream(t, "/process.Process/Connect", s.envd(), `{"process":{"pid":99999}}`); status != 200 || !strings.Contains(string(end), `"not_found"`) {
		t.Errorf("Connect to an unknown pid: %d %s", status, end)
	}

	// Still serving, and a command still runs after all that.
	_, msgs, end := n.connectStream(t, "/process.Process/Start", s.envd(), `{"process":{"cmd":"echo","args":["alive"]}}`)
	if string(end) != "{}" || len(msgs) < 3 || !strings.Contains(string(msgs[1]), "YWxpdmUK") {
		t.Fatalf("after the hostile requests: %s %s", msgs, end)
	}
}

// TestTenantsAndRecords checks that the E2B API goes through the same
// session service as the native one: the tenant's session quota answers
// in E2B's shape, commands and cells are recorded as executions of the
// session, a token opens only its own sandbox, and a killed sandbox is
// gone for every call (health 502, RPCs unavailable).
func TestTenantsAndRecords(t *testing.T) {
	n := newNodeWith(t, teststack.Options{NoServer: true, Admission: provision.Admission{SessionsPerTenant: 1}})
	s := n.create(t, n.keyA, `{"templateID":"base"}`)
	r := n.do(t, "POST", "/v2/sandboxes", map[string]string{"X-API-KEY": n.keyA}, strings.NewReader(`{"templateID":"base"}`))
	var e apiErr
	r.json(t, &e)
	if r.status != 429 || e.Code != 429 || r.header.Get("Retry-After") == "" {
		t.Fatalf("over the tenant's session quota: %d %s (Retry-After %q)", r.status, r.body, r.header.Get("Retry-After"))
	}

	_, _, end := n.connectStream(t, "/process.Process/Start", s.envd(), `{"process":{"cmd":"/bin/bash","args":["-l","-c","echo recorded"]}}`)
	if string(end) != "{}" {
		t.Fatalf("Start: %s", end)
	}
	if r := n.do(t, "POST", "/execute", s.interp(), strings.NewReader(`{"code":"21*2"}`)); r.status != 200 {
		t.Fatalf("execute: %d %s", r.status, r.body)
	}
	ctx := context.Background()
	var tenantID string
	for _, tn := range mustTenants(t, n) {
		if tn.Name == "a" {
			tenantID = tn.ID
		}
	}
	list, err := n.st.Store.ListExecutions(ctx, airlock.ExecutionFilter{TenantID: tenantID, Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	var sawExec, sawCell bool
	for _, x := range list {
		if x, err = n.st.Store.Execution(ctx, tenantID, x.ID); err != nil {
			t.Fatal(err)
		}
		if x.SessionID != s.SandboxID || x.Status != airlock.StatusCompleted {
			continue
		}
		sawExec = sawExec || x.Stdout == "recorded\n"
		sawCell = sawCell || x.Language == airlock.Language("python") && x.ExitCode == 0
	}
	if !sawExec || !sawCell {
		t.Fatalf("records of the session: exec %v, cell %v: %+v", sawExec, sawCell, list)
	}

	// Killed: gone for every call.
	if r := n.do(t, "DELETE", "/sandboxes/"+s.SandboxID, map[string]string{"X-API-KEY": n.keyA}, nil); r.status != 204 {
		t.Fatalf("kill: %d %s", r.status, r.body)
	}
	if r := n.do(t, "GET", "/health", s.envd(), nil); r.status != 502 {
		t.Errorf("health after kill: %d", r.status)
	}
	r = n.connectUnary(t, "/filesystem.Filesystem/Stat", s.envd(), `{"path":"x"}`)
	var ce connectErr
	if json.Unmarshal(r.body, &ce); ce.Code != "unavailable" {
		t.Errorf("Stat after kill: %d %s", r.status, r.body)
	}
	if r := n.do(t, "POST", "/execute", s.interp(), strings.NewReader(`{"code":"1"}`)); r.status != 502 {
		t.Errorf("execute after kill: %d %s", r.status, r.body)
	}
	if r := n.do(t, "DELETE", "/sandboxes/"+s.SandboxID, map[string]string{"X-API-KEY": n.keyA}, nil); r.status != 404 {
		t.Errorf("second kill: %d %s", r.status, r.body)
	}

}
