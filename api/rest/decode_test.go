package rest_test

import (
	"strings"
	"testing"
)

// Every JSON body the API decodes is read strictly: an unknown member, a
// member given twice or a name in another case is a 400 problem naming
// the member, at any depth, and the service is never called.
func TestStrictRequestBodies(t *testing.T) {
	sess := &fakeSessions{}
	e := newEnv(t, withSessions(sess))
	const (
		execute = "/v1/execute"
		sandbox = "/v1/sandbox/execute"
		create  = "/v1/sessions"
		extend  = "/v1/sessions/s1/timeout"
		network = "/v1/sessions/s1/network"
		exec    = "/v1/sessions/s1/exec"
		signal  = "/v1/sessions/s1/exec/7/signal"
		context = "/v1/sessions/s1/contexts"
		cell    = "/v1/sessions/s1/contexts/c1/run"
	)
	tests := []struct {
		name   string
		method string
		path   string
		body   string
		status int
		slug   string
		detail string // substring of the detail
	}{
		// Unknown members.
		{"typo", "POST", execute, `{"language":"python","code":"x","timeout_secs":5}`, 400, "unknown-field", `"timeout_secs"`},
		{"other case", "POST", execute, `{"language":"python","code":"x","Timeout_Sec":5}`, 400, "unknown-field", `"Timeout_Sec"`},
		{"upper case", "POST", execute, `{"LANGUAGE":"python","code":"x"}`, 400, "unknown-field", `"LANGUAGE"`},
		{"unknown object member", "POST", execute, `{"language":"python","code":"x","extra":{"a":[1,2]}}`, 400, "unknown-field", `"extra"`},
		{"unknown null member", "POST", execute, `{"language":"python","code":"x","another":null}`, 400, "unknown-field", `"another"`},
		{"escaped unknown name", "POST", execute, `{"language":"python","code":"x","\u0069mage2":"base"}`, 400, "unknown-field", `"image2"`},
		{"reference route has no image", "POST", sandbox, `{"language":"python","code":"x","image":"base"}`, 400, "unknown-field", `"image"`},
		{"reference route has no isolation", "POST", sandbox, `{"language":"python","code":"x","isolation":"kernel"}`, 400, "unknown-field", `"isolation"`},
		{"nested unknown", "POST", create, `{"image":"base","network":{"mode":"none","alow":["x"]}}`, 400, "unknown-field", `"network.alow"`},
		{"nested other case", "POST", create, `{"network":{"Mode":"none"}}`, 400, "unknown-field", `"network.Mode"`},
		{"session typo", "POST", create, `{"timeout_sec":60}`, 400, "unknown-field", `"timeout_sec"`},
		{"extend typo", "POST", extend, `{"timeout_S":60}`, 400, "unknown-field", `"timeout_S"`},
		{"network typo", "PUT", network, `{"mode":"allow_list","allow":["a.test"],"deny":["b.test"]}`, 400, "unknown-field", `"deny"`},
		{"exec typo", "POST", exec, `{"shell":"true","timeout":5}`, 400, "unknown-field", `"timeout"`},
		{"signal typo", "POST", signal, `{"signal":"TERM","sig":"KILL"}`, 400, "unknown-field", `"sig"`},
		{"context typo", "POST", context, `{"language":"python","lang":"node"}`, 400, "unknown-field", `"lang"`},
		{"cell typo", "POST", cell, `{"code":"1","timeout":5}`, 400, "unknown-field", `"timeout"`},

		// Duplicate names.
		{"duplicate", "POST", execute, `{"language":"python","code":"x","code":"y"}`, 400, "duplicate-field", `"code"`},
		{"duplicate escaped", "POST", execute, `{"language":"python","code":"x","\u0063ode":"y"}`, 400, "duplicate-field", `"code"`},
		{"duplicate on the reference route", "POST", sandbox, `{"language":"python","language":"bash","code":"x"}`, 400, "duplicate-field", `"language"`},
		{"nested duplicate", "POST", create, `{"network":{"mode":"none","mode":"allow_list"}}`, 400, "duplicate-field", `"network.mode"`},
		{"duplicate map key", "POST", exec, `{"shell":"true","env":{"A":"1","A":"2"}}`, 400, "duplicate-field", `"env.A"`},
		{"duplicate inside a raw value", "POST", signal, `{"signal":{"a":1,"a":2}}`, 400, "duplicate-field", `"signal.a"`},
		{"duplicate top of a cell", "POST", cell, `{"code":"1","code":"2"}`, 400, "duplicate-field", `"code"`},

		// The other messages stay as they were.
		{"syntax", "POST", execute, `{"language" "python"}`, 400, "invalid-json", "malformed JSON at byte 13"},
		{"empty", "POST", exec, ``, 400, "invalid-json", "empty"},
		{"white space only", "POST", exec, " \n", 400, "invalid-json", "empty"},
		{"truncated", "POST", create, `{"image":`, 400, "invalid-json", "ends in the middle"},
		{"trailing", "POST", extend, `{"timeout_s":1} {}`, 400, "invalid-json", "after the JSON object at byte 15"},
		{"wrong type", "POST", exec, `{"cmd":"ls"}`, 400, "invalid-json", `field "cmd" must be an array, not a string`},
		{"wrong nested type", "POST", create, `{"network":{"mode":"none","allow":[1]}}`, 400, "invalid-json", `field "network.allow.0" must be a string, not a number`},
		{"not whole", "POST", execute, `{"language":"python","code":"x","timeout_s":1.5}`, 400, "invalid-json", `field "timeout_s" must be a whole number in range, not 1.5`},
		{"out of range", "POST", execute, `{"language":"python","code":"x","timeout_s":1e400}`, 400, "invalid-json", `"timeout_s" must be a whole number in range`},
		{"not an object", "POST", context, `["python"]`, 400, "invalid-json", "must be a JSON object, not an array"},
		{"invalid UTF-8", "POST", execute, "{\"language\":\"python\",\"code\":\"\xff\"}", 400, "invalid-json", "invalid UTF-8"},
		{"too large", "POST", exec, `{"shell":"` + strings.Repeat("x", 3<<20) + `"}`, 413, "request-too-large", "larger than"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e.t = t
			before, execs := sess.callCount(), e.exec.callCount()
			resp := e.do(req{method: tt.method, path: tt.path, key: e.keyA, body: tt.body,
				header: map[string]string{"Content-Type": "application/json"}})
			p := wantProblem(t, resp, tt.status, tt.slug)
			if !strings.Contains(p.Detail, tt.detail) {
				t.Errorf("detail %q does not have %q", p.Detail, tt.detail)
			}
			if sess.callCount() != before || e.exec.callCount() != execs {
				t.Errorf("the service was called with a bad body")
			}
		})
	}
}

// Bodies that are right in every respect still pass, with members in any
// order and escapes in names.
func TestStrictBodiesAccept(t *testing.T) {
	sess := &fakeSessions{}
	e := newEnv(t, withSessions(sess))
	for _, tt := range []struct{ method, path, body string }{
		{"POST", "/v1/execute", `{"code":"x","language":"python","timeout_sec":5,"allow_network":false,"image":"python-ds","isolation":"kernel"}`},
		{"POST", "/v1/execute", `{"l\u0061nguage":"python","code":"x"}`},
		{"POST", "/v1/execute", `null`},
		{"POST", "/v1/sandbox/execute", `{"language":"python","code":"x","timeout_sec":15,"allow_network":false}`},
		{"POST", "/v1/sessions", `{"image":"base","size":"small","timeout_s":60,"idle_timeout_s":60,"network":{"mode":"none"},"broker_scopes":[]}`},
		{"POST", "/v1/sessions/s1/exec", `{"shell":"true","env":{"A":"1","a":"2"},"cwd":"/tmp","stdin":"x","timeout_sec":5}`},
		{"POST", "/v1/sessions/s1/exec/7/signal", `{"signal":15}`},
		{"POST", "/v1/sessions/s1/contexts/c1/run", `{"code":"1","timeout_sec":5}`},
	} {
		e.t = t
		resp := e.do(req{method: tt.method, path: tt.path, key: e.keyA, body: tt.body,
			header: map[string]string{"Content-Type": "application/json"}})
		body := readBody(t, resp)
		// null is an empty request: the validation after decoding answers.
		if tt.body == "null" {
			if resp.StatusCode != 400 || !strings.Contains(string(body), "missing-language") {
				t.Errorf("%s %s: %d %s", tt.method, tt.path, resp.StatusCode, body)
			}
			continue
		}
		if resp.StatusCode/100 != 2 {
			t.Errorf("%s %s %s: %d %s", tt.method, tt.path, tt.body, resp.StatusCode, body)
		}
	}
}
