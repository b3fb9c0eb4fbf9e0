package rest_test

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/api/rest"
)

func TestStatusFor(t *testing.T) {
	tests := []struct {
		code   string
		status int
	}{
		{airlock.EINVALID, 400},
		{airlock.EUNAUTHORIZED, 401},
		{airlock.EFORBIDDEN, 403},
		{airlock.ENOTFOUND, 404},
		{airlock.ECONFLICT, 409},
		{airlock.ETOOLARGE, 413},
		{airlock.ERATELIMITED, 429},
		{airlock.EUNAVAILABLE, 503},
		{airlock.ENOTIMPLEMENTED, 501},
		{airlock.EINTERNAL, 500},
		{"no-such-code", 500},
		{"", 500},
	}
	for _, tt := range tests {
		if got := rest.StatusFor(tt.code); got != tt.status {
			t.Errorf("StatusFor(%q) = %d, want %d", tt.code, got, tt.status)
		}
	}
}

func TestErrorFromProblem(t *testing.T) {
	tests := []struct {
		name string
		p    *rest.Problem
		want *airlock.Error
	}{
		{"typed", &rest.Problem{Type: "urn:airlock:problem:unknown-language", Title: "Bad Request", Status: 400, Detail: "unknown language", Code: "invalid"},
			&airlock.Error{Code: airlock.EINVALID, Type: "unknown-language", Message: "unknown language"}},
		{"default slug", &rest.Problem{Type: "urn:airlock:problem:not-found", Title: "Not Found", Status: 404, Detail: "execution not found", Code: "not_found"},
			&airlock.Error{Code: airlock.ENOTFOUND, Type: "not-found", Message: "execution not found"}},
		{"no code: from status", &rest.Problem{Type: "urn:airlock:problem:slow-down", Title: "Too Many Requests", Status: 429},
			&airlock.Error{Code: airlock.ERATELIMITED, Type: "slow-down", Message: "Too Many Requests"}},
		{"foreign type", &rest.Problem{Type: "about:blank", Title: "Bad Gateway", Status: 502},
			&airlock.Error{Code: airlock.EUNAVAILABLE, Message: "Bad Gateway"}},
		{"unknown 5xx", &rest.Problem{Status: 507, Title: "Insufficient Storage"},
			&airlock.Error{Code: airlock.EINTERNAL, Message: "Insufficient Storage"}},
		{"unknown 4xx", &rest.Problem{Status: 418, Detail: "teapot"},
			&airlock.Error{Code: airlock.EINVALID, Message: "teapot"}},
		{"nil", nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := rest.ErrorFromProblem(tt.p)
			if (got == nil) != (tt.want == nil) || got != nil && !reflect.DeepEqual(*got, *tt.want) {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestDecodeProblem(t *testing.T) {
	mk := func(status int, ct, body string) *http.Response {
		rec := httptest.NewRecorder()
		if ct != "" {
			rec.Header().Set("Content-Type", ct)
		}
		rec.WriteHeader(status)
		io.WriteString(rec, body)
		return rec.Result()
	}
	tests := []struct {
		name string
		resp *http.Response
		want *airlock.Error
	}{
		{"ok", mk(200, "application/json", `{}`), nil},
		{"problem", mk(413, "application/problem+json", `{"type":"urn:airlock:problem:code-too-large","title":"Request Entity Too Large","status":413,"detail":"too big","code":"too_large"}`),
			&airlock.Error{Code: airlock.ETOOLARGE, Type: "code-too-large", Message: "too big"}},
		{"problem without status", mk(404, "application/problem+json", `{"type":"urn:airlock:problem:not-found","title":"Not Found"}`),
			&airlock.Error{Code: airlock.ENOTFOUND, Type: "not-found", Message: "Not Found"}},
		{"plain text", mk(502, "text/plain", "bad gateway"),
			&airlock.Error{Code: airlock.EUNAVAILABLE, Message: "HTTP 502 Bad Gateway"}},
		{"plain 500", mk(500, "", ""),
			&airlock.Error{Code: airlock.EINTERNAL, Message: "HTTP 500 Internal Server Error"}},
		{"extension members", mk(429, "application/problem+json", `{"type":"urn:airlock:problem:run-quota","title":"Too Many Requests","status":429,"detail":"over","code":"rate_limited","quota":"runs","limit":2,"used":2,"nested":{"a":[1]}}`),
			&airlock.Error{Code: airlock.ERATELIMITED, Type: "run-quota", Message: "over",
				Extensions: map[string]any{"quota": "runs", "limit": 2.0, "used": 2.0, "nested": map[string]any{"a": []any{1.0}}}}},
		{"broken problem", mk(401, "application/problem+json", `{"type":`),
			&airlock.Error{Code: airlock.EUNAUTHORIZED, Message: "HTTP 401 Unauthorized"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := rest.DecodeProblem(tt.resp)
			if tt.want == nil {
				if err != nil {
					t.Errorf("got %v, want nil", err)
				}
				return
			}
			got, ok := err.(*airlock.Error)
			if !ok || !reflect.DeepEqual(*got, *tt.want) {
				t.Errorf("got %#v, want %+v", err, tt.want)
			}
		})
	}
}

// Extension members are written beside the standard ones, never over
// them, and read back.
func TestProblemExtensions(t *testing.T) {
	p := rest.Problem{Type: "urn:airlock:problem:run-quota", Title: "Too Many Requests", Status: 429, Detail: "d", Code: "rate_limited",
		Extensions: map[string]any{"quota": "runs", "limit": int64(3), "status": 200, "code": "x", "type": "y"}}
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	if m["status"] != 429.0 || m["code"] != "rate_limited" || m["type"] != p.Type || m["quota"] != "runs" || m["limit"] != 3.0 {
		t.Errorf("encoded %s", b)
	}
	var back rest.Problem
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if back.Status != 429 || !reflect.DeepEqual(back.Extensions, map[string]any{"quota": "runs", "limit": 3.0}) {
		t.Errorf("decoded %+v", back)
	}
	// Without extensions, the document is what it always was.
	p.Extensions = nil
	b, _ = json.Marshal(p)
	if string(b) != `{"type":"urn:airlock:problem:run-quota","title":"Too Many Requests","status":429,"detail":"d","code":"rate_limited"}` {
		t.Errorf("plain: %s", b)
	}
}

// The server's problems decode back to the codes they came from.
func TestProblemRoundTrip(t *testing.T) {
	e := newEnv(t)
	tests := []struct {
		r        req
		code     string
		typ      string
		inDetail string
	}{
		{req{method: "GET", path: "/v1/executions"}, airlock.EUNAUTHORIZED, "unauthorized", "API key"},
		{req{method: "POST", path: "/v1/execute", key: "A", body: `{"language":"cobol","code":"x"}`}, airlock.EINVALID, "unknown-language", "cobol"},
		{req{method: "GET", path: "/v1/executions/nope", key: "A"}, airlock.ENOTFOUND, "not-found", "nope"},
		{req{method: "POST", path: "/v1/execute", key: "A", body: `{"language":"python","code":"x","allow_network":true}`}, airlock.EFORBIDDEN, "network-unavailable", "allow_network"},
	}
	for _, tt := range tests {
		t.Run(tt.typ, func(t *testing.T) {
			e.t = t
			if tt.r.key == "A" {
				tt.r.key = e.keyA
			}
			err := rest.DecodeProblem(e.do(tt.r))
			got, ok := err.(*airlock.Error)
			if !ok || got.Code != tt.code || got.Type != tt.typ || !strings.Contains(got.Message, tt.inDetail) {
				t.Errorf("got %#v, want code %s type %s", err, tt.code, tt.typ)
			}
			if rest.StatusFor(got.Code) != rest.StatusFor(tt.code) {
				t.Errorf("status mismatch")
			}
		})
	}
}

// A problem document from a server is untrusted input to a client: any
// body decodes to a known code, extensions never shadow the standard
// members, and what decodes encodes again as one JSON object.
func FuzzDecodeProblem(f *testing.F) {
	for _, s := range []string{
		`{"type":"urn:airlock:problem:run-quota","title":"T","status":429,"code":"rate_limited","quota":"runs","limit":2}`,
		`{"type":"x","code":"nope","status":"429"}`, `{"detail":1}`, `[]`, `{"a":{"b":[1,2,{"c":null}]}}`, `{`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		rec := httptest.NewRecorder()
		rec.Header().Set("Content-Type", "application/problem+json")
		rec.WriteHeader(429)
		io.WriteString(rec, body)
		err := rest.DecodeProblem(rec.Result())
		var e *airlock.Error
		if !errors.As(err, &e) || !airlock.KnownCode(e.Code) {
			t.Fatalf("%q: %v", body, err)
		}
		for _, k := range []string{"type", "title", "status", "detail", "instance", "code"} {
			if _, ok := e.Extensions[k]; ok {
				t.Fatalf("%q: extension %q", body, k)
			}
		}
		p := rest.Problem{Type: "urn:airlock:problem:x", Title: "T", Status: 429, Extensions: e.Extensions}
		out, err := json.Marshal(p)
		var back map[string]any
		if err != nil || json.Unmarshal(out, &back) != nil || back["status"] != 429.0 {
			t.Fatalf("%q: re-encoded %s, %v", body, out, err)
		}
	})
}
