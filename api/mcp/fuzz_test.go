package mcp_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/api/mcp"
)

// keys is a key store with one key.
type keys struct{ key string }

func (k keys) APIKeyByHash(_ context.Context, hash string) (*airlock.APIKey, error) {
	if hash == airlock.HashAPIKey(k.key) {
		return &airlock.APIKey{ID: "k1", TenantID: "t1", Role: airlock.RoleTenant, Hash: hash}, nil
	}
	return nil, airlock.ErrNotFound
}

func (k keys) TenantByID(_ context.Context, id string) (*airlock.Tenant, error) {
	if id == "t1" {
		return &airlock.Tenant{ID: "t1", Name: "fuzz"}, nil
	}
	return nil, airlock.ErrNotFound
}

// fakeAPI answers like the REST API would, without sandboxes: a run, a
// session, files, cells; anything else a problem.
func fakeAPI() http.Handler {
	mux := http.NewServeMux()
	js := func(w http.ResponseWriter, v any) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(v)
	}
	now := time.Unix(1700000000, 0).UTC()
	exe := &airlock.Execution{ID: "e1", Language: "bash", Status: airlock.StatusCompleted, Stdout: "hi\n", CreatedAt: now,
		Artifacts: []airlock.Artifact{{ID: "a1", Filename: "x.png", SizeBytes: 8, ContentType: "image/png"}}}
	sess := &airlock.Session{ID: "s1", State: airlock.SessionReady, CreatedAt: now, ExpiresAt: now}
	mux.HandleFunc("POST /v1/execute", func(w http.ResponseWriter, r *http.Request) { io.Copy(io.Discard, r.Body); js(w, exe) })
	mux.HandleFunc("GET /v1/artifacts/{id}", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("\x89PNG\r\n\x1a\n")) })
	mux.HandleFunc("POST /v1/sessions", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(201); js(w, sess) })
	mux.HandleFunc("DELETE /v1/sessions/{id}", func(w http.ResponseWriter, r *http.Request) { js(w, sess) })
	mux.HandleFunc("POST /v1/sessions/{id}/exec", func(w http.ResponseWriter, r *http.Request) { js(w, exe) })
	mux.HandleFunc("GET /v1/sessions/{id}/contexts", func(w http.ResponseWriter, r *http.Request) {
		js(w, map[string]any{"contexts": []airlock.CodeContext{{ID: "c1", Language: "python", State: "idle"}}})
	})
	mux.HandleFunc("POST /v1/sessions/{id}/contexts/{cid}/run", func(w http.ResponseWriter, r *http.Request) {
		js(w, airlock.CellResult{ContextID: "c1", Outputs: []airlock.CellOutput{{Type: "image/png", Data: "not base64!"}}, ContextState: "idle"})
	})
	mux.HandleFunc("PUT /v1/sessions/{id}/files", func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		js(w, airlock.PutFileResult{Path: r.URL.Query().Get("path"), Size: n})
	})
	mux.HandleFunc("GET /v1/sessions/{id}/files", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("list") != "" {
			js(w, airlock.FileList{Path: "/workspace", Entries: []airlock.FileEntry{{Name: "a", Type: "file"}}})
			return
		}
		w.Write([]byte("\xff\xfe text \x00"))
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/problem+json")
		w.Header().Set("Retry-After", "3")
		w.WriteHeader(429)
		w.Write([]byte(`{"type":"urn:airlock:problem:session-quota","title":"Too Many Requests","status":429,"detail":"full","code":"rate_limited"}`))
	})
	return mux
}

// FuzzHandler sends arbitrary JSON-RPC bodies to /mcp with a valid key:
// whatever comes in, the handler answers without a panic and without a
// server error, and a tool call's failure is a tool error or a JSON-RPC
// error, never a cut response.
func FuzzHandler(f *testing.F) {
	init := `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"fuzz","version":"1"}}}`
	seeds := []string{
		init,
		`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"run_code","arguments":{"language":"bash","code":"echo hi"}}}`,
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"run_code","arguments":{"language":"bash","code":{"a":[1,2,{}]}}}}`,
		`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"create_session","arguments":{"network":{"mode":"allow_list","allow":[1]}}}}`,
		`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"run_cell","arguments":{"session_id":"s1","code":"plt.plot()"}}}`,
		`{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"write_file","arguments":{"session_id":"s1","path":"../x","content":"////","encoding":"base64"}}}`,
		`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"read_file","arguments":{"session_id":"s1","path":"a","max_bytes":3}}}`,
		`{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"list_files","arguments":{"session_id":"s1","path":null}}}`,
		`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"exec","arguments":{"session_id":"s1","cmd":["a",null],"env":{"=":"x"}}}}`,
		`{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"name":"delete_session","arguments":[]}}`,
		`{"jsonrpc":"2.0","id":11,"method":"tools/call","params":{"name":"nope"}}`,
		`[{"jsonrpc":"2.0","id":1,"method":"tools/list"},{"jsonrpc":"2.0","method":"notifications/initialized"}]`,
		`{"jsonrpc":"2.0","id":12,"method":"tools/call","params":{"name":"run_code","arguments":{"language":"bash","code":"x","timeout_s":1e309}}}`,
		`{"jsonrpc":"1.0"}`, `null`, `{`, ``, "\x00\xff",
	}
	for _, s := range seeds {
		f.Add(s)
	}
	h, err := mcp.NewHandler(mcp.HandlerConfig{API: fakeAPI(), Keys: keys{"k"}, Logger: slog.New(slog.DiscardHandler), MaxBodyBytes: 1 << 20})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body string) {
		req := httptest.NewRequest("POST", "/mcp", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer k")
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code >= 500 {
			t.Fatalf("status %d for %q: %s", w.Code, body, w.Body.String())
		}
		if w.Code == 200 && strings.Contains(body, `"tools/call"`) && !strings.Contains(w.Body.String(), `"result"`) && !strings.Contains(w.Body.String(), `"error"`) {
			t.Fatalf("tool call without a result or an error: %q -> %s", body, w.Body.String())
		}
	})
}
