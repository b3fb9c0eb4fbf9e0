package rest_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/api/rest"
)

const okBody = `{"language":"python","code":"print(1)"}`

func TestExecuteProblems(t *testing.T) {
	e := newEnv(t)
	jsonCT := map[string]string{"Content-Type": "application/json"}
	big := func(n int) string {
		return `{"language":"python","code":"` + strings.Repeat("a", n) + `"}`
	}
	tests := []struct {
		name   string
		r      req
		status int
		slug   string
		detail string // substring of the detail, if set
	}{
		{"no key", req{body: okBody}, 401, "unauthorized", ""},
		{"wrong key", req{key: "alk_notakey", body: okBody}, 401, "unauthorized", ""},
		{"not bearer", req{body: okBody, header: map[string]string{"Authorization": "Basic dXNlcjpwYXNz"}}, 401, "unauthorized", ""},
		{"bearer without key", req{body: okBody, header: map[string]string{"Authorization": "Bearer "}}, 401, "unauthorized", ""},
		{"empty body", req{key: "A"}, 400, "invalid-json", "empty"},
		{"bad JSON", req{key: "A", body: `{"language" "python"}`}, 400, "invalid-json", "byte 13"},
		{"truncated JSON", req{key: "A", body: `{"language":`}, 400, "invalid-json", ""},
		{"trailing JSON", req{key: "A", body: okBody + ` {}`}, 400, "invalid-json", "after the JSON object"},
		{"trailing garbage", req{key: "A", body: okBody + `x`}, 400, "invalid-json", "after the JSON object"},
		{"code not a string", req{key: "A", body: `{"language":"python","code":1}`}, 400, "invalid-json", `"code"`},
		{"timeout not a number", req{key: "A", body: `{"language":"python","code":"x","timeout_s":"5"}`}, 400, "invalid-json", `"timeout_s"`},
		{"timeout not whole", req{key: "A", body: `{"language":"python","code":"x","timeout_s":1.5}`}, 400, "invalid-json", `"timeout_s"`},
		{"array body", req{key: "A", body: `[]`}, 400, "invalid-json", "object"},
		{"missing language", req{key: "A", body: `{"code":"x"}`}, 400, "missing-language", ""},
		{"unknown language", req{key: "A", body: `{"language":"cobol","code":"x"}`}, 400, "unknown-language", "cobol"},
		{"code over 1 MiB", req{key: "A", body: big(airlock.MaxCodeBytes + 1)}, 413, "code-too-large", ""},
		{"body over the limit", req{key: "A", body: big(rest.MaxRequestBytes)}, 413, "request-too-large", ""},
		{"timeout too long", req{key: "A", body: `{"language":"python","code":"x","timeout_s":31}`}, 400, "timeout-out-of-range", ""},
		{"timeout negative", req{key: "A", body: `{"language":"python","code":"x","timeout_s":-1}`}, 400, "timeout-out-of-range", ""},
		// timeout_sec is timeout_s's deprecated alias (airlock.RenamedFields):
		// read as it, and refused beside it with another value.
		{"deprecated alias read", req{key: "A", body: `{"language":"python","code":"x","timeout_sec":31}`}, 400, "timeout-out-of-range", ""},
		{"alias and name agree", req{key: "A", body: `{"language":"python","code":"x","timeout_sec":31,"timeout_s":31}`}, 400, "timeout-out-of-range", ""},
		{"alias and name differ", req{key: "A", body: `{"language":"python","code":"x","timeout_sec":5,"timeout_s":6}`}, 400, "conflicting-fields", `"timeout_sec"`},
		{"alias given twice", req{key: "A", body: `{"language":"python","code":"x","timeout_sec":5,"timeout_sec":5}`}, 400, "duplicate-field", ""},
		{"agent id too long", req{key: "A", body: okBody, header: map[string]string{"X-Agent-Id": strings.Repeat("a", 201)}}, 400, "invalid-agent-id", ""},
		{"agent id not ASCII", req{key: "A", body: okBody, header: map[string]string{"X-Agent-Id": "agent-é"}}, 400, "invalid-agent-id", ""},
		{"text/plain", req{key: "A", body: okBody, header: map[string]string{"Content-Type": "text/plain"}}, 415, "unsupported-media-type", ""},
		{"form", req{key: "A", body: okBody, header: map[string]string{"Content-Type": "application/x-www-form-urlencoded"}}, 415, "unsupported-media-type", ""},
		{"bad media type", req{key: "A", body: okBody, header: map[string]string{"Content-Type": ";;"}}, 415, "unsupported-media-type", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e.t = t
			r := tt.r
			r.method, r.path = "POST", "/v1/execute"
			if r.key == "A" {
				r.key = e.keyA
			}
			if r.header == nil {
				r.header = jsonCT
			}
			before := e.exec.callCount()
			resp := e.do(r)
			p := wantProblem(t, resp, tt.status, tt.slug)
			if !strings.Contains(p.Detail, tt.detail) {
				t.Errorf("detail %q does not mention %q", p.Detail, tt.detail)
			}
			if tt.status == 401 && !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer") {
				t.Errorf("WWW-Authenticate %q, want Bearer", resp.Header.Get("WWW-Authenticate"))
			}
			if n := e.exec.callCount(); n != before {
				t.Errorf("executor called on a bad request")
			}
		})
	}
}

func TestExecuteAccepts(t *testing.T) {
	e := newEnv(t)
	tests := []struct {
		name   string
		body   string
		header map[string]string
	}{
		{"no content type", okBody, nil},
		{"json with charset", okBody, map[string]string{"Content-Type": "application/json; charset=utf-8"}},
		{"+json", okBody, map[string]string{"Content-Type": "application/vnd.airlock+json"}},
		{"trailing white space", okBody + " \n\t", nil},
		{"code of exactly 1 MiB", `{"language":"bash","code":"` + strings.Repeat("a", airlock.MaxCodeBytes) + `"}`, nil},
		{"max timeout", `{"language":"node","code":"x","timeout_s":30}`, nil},
		{"agent id", okBody, map[string]string{"X-Agent-Id": "agent 7/planner:v2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e.t = t
			resp := e.do(req{method: "POST", path: "/v1/execute", key: e.keyA, body: tt.body, header: tt.header})
			var m map[string]any
			decodeJSON(t, resp, http.StatusOK, &m)
			if got, want := e.exec.lastCall().agentID, tt.header["X-Agent-Id"]; got != want {
				t.Errorf("executor got agent %q, want %q", got, want)
			}
		})
	}
}

func TestExecuteResultShape(t *testing.T) {
	e := newEnv(t)
	e.exec.setFiles(
		testFile{"out/result.txt", "text/plain; charset=utf-8", "forty-two\n"},
		testFile{"plot.png", "image/png", "\x89PNG\r\n\x1a\n"},
	)
	resp := e.do(req{method: "POST", path: "/v1/execute", key: e.keyA,
		body:   `{"language":"python","code":"import sys; sys.exit(3)","timeout_s":5}`,
		header: map[string]string{"Content-Type": "application/json", "X-Agent-Id": "agent-1"}})
	var m map[string]any
	decodeJSON(t, resp, http.StatusOK, &m)

	for _, k := range []string{"exit_code", "stdout", "stderr", "duration_ms", "peak_memory_mb", "timed_out",
		"oom_killed", "stdout_truncated", "stderr_truncated", "execution_id", "artifacts"} {
		if _, ok := m[k]; !ok {
			t.Errorf("response lacks %q: %v", k, m)
		}
	}
	// A failing program is a result.
	if m["exit_code"] != float64(3) || m["stdout"] != "hello\n" || m["stderr"] != "boom\n" ||
		m["timed_out"] != false || m["duration_ms"] != float64(42) || m["peak_memory_mb"] != float64(7) {
		t.Errorf("unexpected result: %v", m)
	}
	call := e.exec.lastCall()
	if call.tenant.ID != e.tenantA.ID || call.agentID != "agent-1" ||
		call.req != (airlock.ExecuteRequest{Language: "python", Code: "import sys; sys.exit(3)", TimeoutSec: 5}) {
		t.Errorf("executor got %+v", call)
	}
	arts, ok := m["artifacts"].([]any)
	if !ok || len(arts) != 2 {
		t.Fatalf("artifacts = %#v, want 2", m["artifacts"])
	}
	for _, x := range arts {
		a := x.(map[string]any)
		for _, k := range []string{"id", "filename", "size_bytes", "url"} {
			if _, ok := a[k]; !ok {
				t.Errorf("artifact lacks %q: %v", k, a)
			}
		}
		u, err := url.Parse(a["url"].(string))
		if err != nil || !strings.HasPrefix(a["url"].(string), e.srv.URL+"/v1/artifacts/"+a["id"].(string)+"?") {
			t.Fatalf("artifact url %q is not an absolute URL on %s", a["url"], e.srv.URL)
		}
		q := u.Query()
		if q.Get("tenant") != e.tenantA.ID || len(q.Get("token")) != 64 || q.Get("expires") == "" {
			t.Errorf("artifact url %q lacks tenant, token or expires", u)
		}
	}
}

func TestExecuteNoArtifactsIsEmptyArray(t *testing.T) {
	e := newEnv(t)
	e.exec.setFn(func(ctx context.Context, tenant *airlock.Tenant, agentID string, req airlock.ExecuteRequest) (*airlock.Execution, error) {
		return &airlock.Execution{ID: "x1", TenantID: tenant.ID, Language: req.Language, ExitCode: 0}, nil
	})
	resp := e.do(req{method: "POST", path: "/v1/execute", key: e.keyA, body: okBody})
	var m map[string]any
	body := decodeJSON(t, resp, http.StatusOK, &m)
	if !strings.Contains(string(body), `"artifacts":[]`) {
		t.Errorf("artifacts not an empty array: %s", body)
	}
}

func TestExecuteExecutorErrors(t *testing.T) {
	e := newEnv(t)
	const secret = "dial unix /var/lib/airlock/secret.sock: password=hunter2"
	tests := []struct {
		name   string
		err    error
		panics bool
		status int
		slug   string
		detail string
	}{
		{"typed invalid", airlock.Problem(airlock.EINVALID, "unknown-image", "unknown image %q", "ghost"), false, 400, "unknown-image", `unknown image "ghost"`},
		{"wrapped typed", fmt.Errorf("resolve: %w", airlock.Problem(airlock.EINVALID, "unknown-image", "unknown image")), false, 400, "unknown-image", "unknown image"},
		{"rate limited", airlock.Errorf(airlock.ERATELIMITED, "slow down"), false, 429, "rate-limited", "slow down"},
		{"unavailable", airlock.Errorf(airlock.EUNAVAILABLE, "no capacity"), false, 503, "unavailable", "no capacity"},
		{"plain error", fmt.Errorf("start sandbox: %s", secret), false, 500, "internal", "internal error"},
		{"internal with message", &airlock.Error{Code: airlock.EINTERNAL, Message: secret, Err: errBoom}, false, 500, "internal", "internal error"},
		{"unknown code", &airlock.Error{Code: "weird", Message: secret}, false, 500, "internal", "internal error"},
		{"panic", nil, true, 500, "internal", "internal error"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e.t = t
			e.exec.setFn(func(ctx context.Context, tenant *airlock.Tenant, agentID string, req airlock.ExecuteRequest) (*airlock.Execution, error) {
				if tt.panics {
					panic("executor exploded: " + secret)
				}
				return nil, tt.err
			})
			resp := e.do(req{method: "POST", path: "/v1/execute", key: e.keyA, body: okBody})
			body := readBody(t, resp)
			resp.Body = readCloser(body)
			p := wantProblem(t, resp, tt.status, tt.slug)
			if p.Detail != tt.detail {
				t.Errorf("detail %q, want %q", p.Detail, tt.detail)
			}
			if strings.Contains(string(body), "hunter2") || strings.Contains(string(body), "secret.sock") {
				t.Errorf("internal details leaked: %s", body)
			}
			if tt.status == 500 && !strings.Contains(e.logs.String(), "hunter2") {
				t.Errorf("internal error not logged")
			}
			// The client maps the problem back.
			got := rest.ErrorFromProblem(p)
			if want := airlock.ErrorCode(tt.err); tt.err != nil && want != "weird" && got.Code != want {
				t.Errorf("ErrorFromProblem code %q, want %q", got.Code, want)
			}
		})
	}
}

func TestUnknownRouteAndMethod(t *testing.T) {
	e := newEnv(t)
	tests := []struct {
		method, path string
		status       int
		slug         string
		allow        []string
	}{
		{"GET", "/nope", 404, "route-not-found", nil},
		{"GET", "/v1/nope", 404, "route-not-found", nil},
		{"POST", "/v1/executions/x/y", 404, "route-not-found", nil},
		{"GET", "/v1/execute", 405, "method-not-allowed", []string{"POST"}},
		{"DELETE", "/v1/executions/x", 405, "method-not-allowed", []string{"GET", "HEAD"}},
		{"POST", "/healthz", 405, "method-not-allowed", []string{"GET", "HEAD"}},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			e.t = t
			resp := e.do(req{method: tt.method, path: tt.path, key: e.keyA})
			wantProblem(t, resp, tt.status, tt.slug)
			var allow []string
			for _, m := range strings.Split(resp.Header.Get("Allow"), ",") {
				if m = strings.TrimSpace(m); m != "" {
					allow = append(allow, m)
				}
			}
			slices.Sort(allow)
			if !slices.Equal(allow, tt.allow) {
				t.Errorf("Allow %q, want %q", resp.Header.Get("Allow"), tt.allow)
			}
		})
	}
}

func TestRequestIDAndLog(t *testing.T) {
	e := newEnv(t)
	resp := e.do(req{method: "POST", path: "/v1/execute", key: e.keyA, body: okBody})
	var m map[string]any
	decodeJSON(t, resp, http.StatusOK, &m)
	id := resp.Header.Get("X-Request-Id")
	if id == "" {
		t.Fatal("no X-Request-Id")
	}
	logs := e.logs.String()
	for _, want := range []string{"request_id=" + id, "method=POST", "path=/v1/execute", "status=200", "tenant=" + e.tenantA.ID, "duration="} {
		if !strings.Contains(logs, want) {
			t.Errorf("log lacks %q:\n%s", want, logs)
		}
	}
	if strings.Contains(logs, e.keyA) {
		t.Errorf("log contains the API key")
	}
}

func readCloser(b []byte) *jsonBody { return &jsonBody{strings.NewReader(string(b))} }

type jsonBody struct{ *strings.Reader }

func (*jsonBody) Close() error { return nil }
