package e2e_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/api/rest"
)

// TestProblemResponses sends bad requests to the real stack over raw HTTP
// and checks each gets the documented RFC 9457 problem, and that none of
// them is recorded as an execution.
func TestProblemResponses(t *testing.T) {
	s := newStack(t, cold)
	body := func(v any) string {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	type req = airlock.ExecuteRequest
	tests := []struct {
		name   string
		key    string // "" sends no Authorization header
		header map[string]string
		body   string
		status int
		typ    string // problem type slug
	}{
		{"unknown language", s.a.key, nil, body(req{Language: "cobol", Code: "DISPLAY 'HI'."}), 400, "unknown-language"},
		{"missing language", s.a.key, nil, body(req{Code: "print(1)"}), 400, "missing-language"},
		{"unknown image", s.a.key, nil, body(req{Language: airlock.Python, Code: "print(1)", Image: "no-such-image"}), 400, "unknown-image"},
		{"image path", s.a.key, nil, body(req{Language: airlock.Python, Code: "print(1)", Image: "../../etc"}), 400, "unknown-image"},
		{"code over 1 MiB", s.a.key, nil, body(req{Language: airlock.Python, Code: "#" + strings.Repeat("x", airlock.MaxCodeBytes)}), 413, "code-too-large"},
		{"timeout too long", s.a.key, nil, body(req{Language: airlock.Python, Code: "print(1)", TimeoutSec: 10000}), 400, "timeout-out-of-range"},
		{"timeout negative", s.a.key, nil, body(req{Language: airlock.Python, Code: "print(1)", TimeoutSec: -1}), 400, "timeout-out-of-range"},
		{"network asked for", s.a.key, nil, body(req{Language: airlock.Python, Code: "print(1)", AllowNetwork: true}), 403, "network-unavailable"},
		{"missing key", "", nil, body(req{Language: airlock.Python, Code: "print(1)"}), 401, "unauthorized"},
		{"wrong key", "alk_" + strings.Repeat("a", 52), nil, body(req{Language: airlock.Python, Code: "print(1)"}), 401, "unauthorized"},
		{"malformed JSON", s.a.key, nil, `{"language": "python", "code": `, 400, "invalid-json"},
		{"wrong media type", s.a.key, map[string]string{"Content-Type": "text/plain"}, body(req{Language: airlock.Python, Code: "print(1)"}), 415, "unsupported-media-type"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := map[string]string{"Content-Type": "application/json"}
			for k, v := range tt.header {
				h[k] = v
			}
			r := s.do(t, http.MethodPost, "/v1/execute", tt.key, strings.NewReader(tt.body), h)
			p := r.problem(t, tt.status)
			if want := rest.ProblemTypePrefix + tt.typ; p.Type != want {
				t.Errorf("type %q, want %q (detail %q)", p.Type, want, p.Detail)
			}
			if tt.status == http.StatusUnauthorized && r.header.Get("WWW-Authenticate") == "" {
				t.Errorf("401 without WWW-Authenticate")
			}
			if p.Detail == "" || strings.Contains(p.Detail, "/var/lib") {
				t.Errorf("detail %q: want a client-safe explanation", p.Detail)
			}
		})
	}

	// timeout_sec 0 means the default, not an error.
	e := s.execute(t, airlock.ExecuteRequest{Language: airlock.Bash, Code: "echo default timeout", TimeoutSec: 0})
	wantResult(t, e, 0, false, false)
	wantStdout(t, e, "default timeout\n")

	// None of the refused requests left a record; the good one did.
	p, err := s.a.client.ListExecutions(context.Background(), 0, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Executions) != 1 || p.Executions[0].ID != e.ID {
		t.Errorf("executions %d, want only the one that ran (%s)", len(p.Executions), e.ID)
	}
	s.waitClean(t, "after the executions")
}
