package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"mime"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/httpapi"
)

// FuzzExecuteBody posts arbitrary bodies (and Content-Types) to
// POST /v1/execute: no panic, only the statuses a body can cause, and a
// problem document for every one that is not 200.
func FuzzExecuteBody(f *testing.F) {
	e := setup(f)
	e.exec.setFn(func(ctx context.Context, tenant *airlock.Tenant, agentID string, req airlock.ExecuteRequest) (*airlock.Execution, error) {
		return &airlock.Execution{ID: "e1", TenantID: tenant.ID, Language: req.Language, ExitCode: 1,
			Artifacts: []airlock.Artifact{{ID: "a1", Filename: "f"}}}, nil
	})
	for _, seed := range []struct{ body, ct string }{
		{okBody, "application/json"},
		{okBody, ""},
		{okBody, "text/plain"},
		{`{"language":"python","code":"x","timeout_sec":31}`, "application/json"},
		{`{"language":"python","code":"x","allow_network":true}`, "application/json"},
		{`{"language":"cobol"}`, "application/json"},
		{`{"language":"python","code":1}`, "application/json; charset=utf-8"},
		{`{"language":"python","code":"x"} {}`, "application/json"},
		{`[`, "application/json"},
		{`null`, "application/json"},
		{`"\ud800"`, "application/json"},
		{"", ""},
		{`{"language":"sql","code":"select 1","timeout_sec":1e400}`, "application/json"},
		{`{"language":"python","code":"` + strings.Repeat("\\u0000", 1000) + `"}`, "application/problem+json"},
	} {
		f.Add([]byte(seed.body), seed.ct)
	}
	allowed := map[int]bool{200: true, 400: true, 403: true, 413: true, 415: true}
	f.Fuzz(func(t *testing.T, body []byte, ct string) {
		r := httptest.NewRequest("POST", "/v1/execute", bytes.NewReader(body))
		r.Header.Set("Authorization", "Bearer "+e.keyA)
		if ct != "" {
			r.Header.Set("Content-Type", ct)
		}
		w := httptest.NewRecorder()
		e.handler.ServeHTTP(w, r)
		if !allowed[w.Code] {
			t.Fatalf("status %d for %q (%q): %s", w.Code, body, ct, w.Body)
		}
		if w.Code == http.StatusOK {
			var ex airlock.Execution
			if err := json.Unmarshal(w.Body.Bytes(), &ex); err != nil {
				t.Fatalf("200 with a body that is not an execution: %v", err)
			}
			return
		}
		mt, _, err := mime.ParseMediaType(w.Header().Get("Content-Type"))
		if err != nil || mt != httpapi.ProblemContentType {
			t.Fatalf("status %d with Content-Type %q", w.Code, w.Header().Get("Content-Type"))
		}
		var p httpapi.Problem
		if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil || p.Status != w.Code ||
			!strings.HasPrefix(p.Type, httpapi.ProblemTypePrefix) {
			t.Fatalf("bad problem %s (%v)", w.Body, err)
		}
	})
}
