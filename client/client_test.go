package client_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/client"
)

const testKey = "alk_testkey"

// fakeAPI mimics the shapes of the Airlock HTTP API.
type fakeAPI struct {
	srv *httptest.Server

	mu       sync.Mutex
	authSeen map[string]string // path -> Authorization header received
	lastReq  airlock.ExecuteRequest
	lastPath string
}

var artifactBytes = []byte("hello, artifact\n")

func sum(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }

func writeProblem(w http.ResponseWriter, status int, slug, title, detail, code string) {
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{
		"type": "urn:airlock:problem:" + slug, "title": title, "status": status, "detail": detail, "code": code,
	})
}

func newFakeAPI(t *testing.T) *fakeAPI {
	t.Helper()
	f := &fakeAPI{authSeen: map[string]string{}}
	mux := http.NewServeMux()
	authed := func(h http.HandlerFunc) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			f.mu.Lock()
			f.authSeen[r.URL.Path] = r.Header.Get("Authorization")
			f.lastPath = r.URL.Path
			f.mu.Unlock()
			if r.Header.Get("Authorization") != "Bearer "+testKey && r.URL.Query().Get("token") != "signed" {
				writeProblem(w, 401, "unauthorized", "Unauthorized", "missing or invalid API key", "unauthorized")
				return
			}
			h(w, r)
		}
	}
	mux.HandleFunc("POST /v1/execute", authed(func(w http.ResponseWriter, r *http.Request) {
		var req airlock.ExecuteRequest
		dec := json.NewDecoder(r.Body)
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil {
			writeProblem(w, 400, "bad-json", "Bad Request", err.Error(), "invalid")
			return
		}
		f.mu.Lock()
		f.lastReq = req
		f.mu.Unlock()
		switch {
		case req.Language == "cobol":
			writeProblem(w, 400, "unknown-language", "Unknown language", `unknown language "cobol" (one of python, bash, node, sql)`, "invalid")
			return
		case req.Code == "garbage":
			w.Header().Set("Content-Type", "text/html")
			io.WriteString(w, "<html><body>\x1b[31mgateway\x1b[0m</body></html>")
			return
		case req.Code == "null":
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, "null")
			return
		case req.Code == "huge":
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"stdout":"`)
			chunk := strings.Repeat("a", 1<<20)
			for i := 0; i < 65; i++ {
				io.WriteString(w, chunk)
			}
			io.WriteString(w, `"}`)
			return
		case req.Code == "proxy":
			w.Header().Set("Content-Type", "text/plain")
			w.WriteHeader(http.StatusBadGateway)
			io.WriteString(w, "upstream connect error")
			return
		case req.Code == "bigproblem":
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusInternalServerError)
			io.WriteString(w, `{"title":"`+strings.Repeat("x", 100<<10)+`"}`)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{
			"execution_id": "ex1", "exit_code": 3, "stdout": "out:" + req.Code, "stderr": "err\n",
			"duration_ms": 12, "peak_memory_mb": 5, "timed_out": false, "oom_killed": false,
			"stdout_truncated": true, "stderr_truncated": false, "agent_id": r.Header.Get("X-Agent-Id"),
			"language": req.Language, "status": "completed",
			"artifacts": []map[string]any{{
				"id": "a1", "filename": "out/hello.txt", "size_bytes": len(artifactBytes),
				"content_type": "text/plain", "sha256": sum(artifactBytes),
				"url": f.srv.URL + "/v1/artifacts/a1?token=signed",
			}},
		})
	}))
	mux.HandleFunc("GET /v1/executions", authed(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"executions":[{"execution_id":"ex-%s-%s"}],"next_cursor":"c2"}`, q.Get("limit"), q.Get("before"))
	}))
	mux.HandleFunc("GET /v1/executions/{id}", authed(func(w http.ResponseWriter, r *http.Request) {
		if r.PathValue("id") != "ex1" {
			writeProblem(w, 404, "not-found", "Not Found", "execution not found", "not_found")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"execution_id":"ex1","exit_code":0,"stdout":"hi"}`)
	}))
	mux.HandleFunc("GET /v1/artifacts/{id}", authed(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Write(artifactBytes)
	}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ok")
	})
	f.srv = httptest.NewServer(mux)
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeAPI) last() (airlock.ExecuteRequest, string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lastReq, f.lastPath
}

func (f *fakeAPI) auth(path string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.authSeen[path]
}

func newClient(t *testing.T, baseURL, key string) *client.Client {
	t.Helper()
	c, err := client.New(client.Config{BaseURL: baseURL, APIKey: key})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		cfg  client.Config
		ok   bool
	}{
		{"http", client.Config{BaseURL: "http://127.0.0.1:8080"}, true},
		{"https with prefix", client.Config{BaseURL: "https://airlock.example/api/", APIKey: "k"}, true},
		{"empty", client.Config{}, false},
		{"no scheme", client.Config{BaseURL: "127.0.0.1:8080"}, false},
		{"ftp", client.Config{BaseURL: "ftp://host"}, false},
		{"no host", client.Config{BaseURL: "http://"}, false},
		{"bad escape", client.Config{BaseURL: "http://host/%zz"}, false},
		{"userinfo", client.Config{BaseURL: "http://u:p@host"}, false},
		{"query", client.Config{BaseURL: "http://host/?a=b"}, false},
		{"key with newline", client.Config{BaseURL: "http://host", APIKey: "a\nb"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			if (err == nil) != tt.ok {
				t.Fatalf("Validate() = %v, want ok=%v", err, tt.ok)
			}
			if err != nil && airlock.ErrorCode(err) != airlock.EINVALID {
				t.Errorf("code = %q, want invalid", airlock.ErrorCode(err))
			}
			if _, err := client.New(tt.cfg); (err == nil) != tt.ok {
				t.Errorf("New() = %v, want ok=%v", err, tt.ok)
			}
		})
	}
}

func TestExecute(t *testing.T) {
	f := newFakeAPI(t)
	c := newClient(t, f.srv.URL, testKey)
	req := airlock.ExecuteRequest{Language: airlock.Python, Code: "print(1)", TimeoutSec: 5, Image: "py"}
	e, err := c.Execute(context.Background(), req, client.WithAgentID("agent-7"))
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := f.last(); got != req {
		t.Errorf("server got %+v, want %+v", got, req)
	}
	if e.ID != "ex1" || e.ExitCode != 3 || e.Stdout != "out:print(1)" || e.Stderr != "err\n" ||
		!e.StdoutTruncated || e.DurationMS != 12 || e.PeakMemoryMB != 5 || e.AgentID != "agent-7" {
		t.Errorf("execution = %+v", e)
	}
	if len(e.Artifacts) != 1 || e.Artifacts[0].Filename != "out/hello.txt" || e.Artifacts[0].SizeBytes != int64(len(artifactBytes)) {
		t.Errorf("artifacts = %+v", e.Artifacts)
	}
}

func TestExecuteAgentIDControlChars(t *testing.T) {
	f := newFakeAPI(t)
	c := newClient(t, f.srv.URL, testKey)
	_, err := c.Execute(context.Background(), airlock.ExecuteRequest{Language: "python", Code: "1"}, client.WithAgentID("a\r\nX-Evil: 1"))
	if airlock.ErrorCode(err) != airlock.EINVALID {
		t.Fatalf("err = %v, want invalid", err)
	}
}

func TestProblemErrors(t *testing.T) {
	f := newFakeAPI(t)
	tests := []struct {
		name       string
		key        string
		req        airlock.ExecuteRequest
		status     int
		code, slug string
		title      string
		inError    string
	}{
		{"problem document", testKey, airlock.ExecuteRequest{Language: "cobol", Code: "x"},
			400, airlock.EINVALID, "unknown-language", "Unknown language", `unknown language "cobol"`},
		{"unauthorized", "alk_wrong", airlock.ExecuteRequest{Language: "python", Code: "x"},
			401, airlock.EUNAUTHORIZED, "unauthorized", "Unauthorized", "missing or invalid API key"},
		{"no key", "", airlock.ExecuteRequest{Language: "python", Code: "x"},
			401, airlock.EUNAUTHORIZED, "unauthorized", "Unauthorized", "HTTP 401"},
		{"proxy text", testKey, airlock.ExecuteRequest{Language: "python", Code: "proxy"},
			502, airlock.EUNAVAILABLE, "", "Bad Gateway", "upstream connect error"},
		{"problem too large", testKey, airlock.ExecuteRequest{Language: "python", Code: "bigproblem"},
			500, airlock.EINTERNAL, "", "Internal Server Error", "HTTP 500"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newClient(t, f.srv.URL, tt.key)
			_, err := c.Execute(context.Background(), tt.req)
			var ce *client.Error
			if !errors.As(err, &ce) {
				t.Fatalf("err = %v (%T), want *client.Error", err, err)
			}
			if ce.Status != tt.status || ce.Code != tt.code || ce.Title != tt.title {
				t.Errorf("error = %+v, want status %d code %q title %q", ce, tt.status, tt.code, tt.title)
			}
			if got := airlock.ErrorCode(err); got != tt.code {
				t.Errorf("airlock.ErrorCode = %q, want %q", got, tt.code)
			}
			var ae *airlock.Error
			if !errors.As(err, &ae) || ae.Type != tt.slug {
				t.Errorf("airlock.Error = %+v, want type %q", ae, tt.slug)
			}
			if !strings.Contains(err.Error(), tt.inError) || len(err.Error()) > 1000 {
				t.Errorf("Error() = %.300q, want it to contain %q and be short", err.Error(), tt.inError)
			}
		})
	}
}

func TestBadSuccessBody(t *testing.T) {
	f := newFakeAPI(t)
	c := newClient(t, f.srv.URL, testKey)
	for _, code := range []string{"garbage", "null", "huge"} {
		t.Run(code, func(t *testing.T) {
			e, err := c.Execute(context.Background(), airlock.ExecuteRequest{Language: "python", Code: code})
			if !errors.Is(err, client.ErrBadResponse) {
				t.Fatalf("Execute = %+v, %v; want ErrBadResponse", e, err)
			}
			if strings.ContainsRune(err.Error(), '\x1b') {
				t.Errorf("error carries a terminal escape: %q", err)
			}
			t.Log(err)
		})
	}
}

func TestExecutionAndList(t *testing.T) {
	f := newFakeAPI(t)
	c := newClient(t, f.srv.URL, testKey)
	ctx := context.Background()

	e, err := c.Execution(ctx, "ex1")
	if err != nil || e.ID != "ex1" || e.Stdout != "hi" {
		t.Fatalf("Execution = %+v, %v", e, err)
	}
	_, err = c.Execution(ctx, "nope")
	if airlock.ErrorCode(err) != airlock.ENOTFOUND {
		t.Errorf("Execution(nope) = %v, want not_found", err)
	}
	_, err = c.Execution(ctx, "../../healthz")
	if _, path := f.last(); airlock.ErrorCode(err) != airlock.ENOTFOUND || !strings.HasPrefix(path, "/v1/executions/") {
		t.Errorf("escaped ID: err %v, server path %q", err, path)
	}
	if _, err := c.Execution(ctx, ""); airlock.ErrorCode(err) != airlock.EINVALID {
		t.Errorf("Execution(\"\") = %v, want invalid", err)
	}

	p, err := c.ListExecutions(ctx, 10, "c1")
	if err != nil || len(p.Executions) != 1 || p.Executions[0].ID != "ex-10-c1" || p.NextCursor != "c2" {
		t.Fatalf("ListExecutions = %+v, %v", p, err)
	}
	p, err = c.ListExecutions(ctx, 0, "")
	if err != nil || p.Executions[0].ID != "ex--" {
		t.Fatalf("ListExecutions(0, \"\") = %+v, %v", p, err)
	}
	if _, err := c.ListExecutions(ctx, -1, ""); airlock.ErrorCode(err) != airlock.EINVALID {
		t.Errorf("ListExecutions(-1) = %v, want invalid", err)
	}
}

func TestBaseURLPrefix(t *testing.T) {
	var got string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.URL.Path
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"execution_id":"x"}`)
	}))
	defer srv.Close()
	for _, base := range []string{srv.URL + "/airlock", srv.URL + "/airlock/"} {
		c := newClient(t, base, testKey)
		if _, err := c.Execute(context.Background(), airlock.ExecuteRequest{Language: "bash", Code: "true"}); err != nil {
			t.Fatal(err)
		}
		if got != "/airlock/v1/execute" {
			t.Errorf("base %q: path %q, want /airlock/v1/execute", base, got)
		}
	}
}

func TestDownloadArtifact(t *testing.T) {
	f := newFakeAPI(t)
	other := newFakeAPI(t) // another host:port
	c := newClient(t, f.srv.URL, testKey)
	ctx := context.Background()
	good := airlock.Artifact{Filename: "hello.txt", SizeBytes: int64(len(artifactBytes)), SHA256: sum(artifactBytes)}

	tests := []struct {
		name     string
		url      string
		srv      *fakeAPI
		path     string
		wantAuth bool
	}{
		{"absolute same host", f.srv.URL + "/v1/artifacts/a1", f, "/v1/artifacts/a1", true},
		{"relative", "/v1/artifacts/a2", f, "/v1/artifacts/a2", true},
		{"relative no slash", "v1/artifacts/a3", f, "/v1/artifacts/a3", true},
		{"other host, signed", other.srv.URL + "/v1/artifacts/a4?token=signed", other, "/v1/artifacts/a4", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := good
			a.URL = tt.url
			var b strings.Builder
			n, err := c.DownloadArtifact(ctx, a, &b)
			if err != nil {
				t.Fatal(err)
			}
			if n != int64(len(artifactBytes)) || b.String() != string(artifactBytes) {
				t.Errorf("got %d bytes %q", n, b.String())
			}
			if auth := tt.srv.auth(tt.path); (auth != "") != tt.wantAuth {
				t.Errorf("Authorization sent = %q, want sent=%v", auth, tt.wantAuth)
			}
		})
	}

	t.Run("mismatches", func(t *testing.T) {
		for _, a := range []airlock.Artifact{
			{Filename: "x", SizeBytes: 3, SHA256: sum(artifactBytes)},
			{Filename: "x", SizeBytes: 100, SHA256: sum(artifactBytes)},
			{Filename: "x", SizeBytes: good.SizeBytes, SHA256: sum([]byte("other"))},
			{Filename: "x", SizeBytes: 0, SHA256: sum(nil)},
		} {
			a.URL = "/v1/artifacts/a1"
			n, err := c.DownloadArtifact(ctx, a, io.Discard)
			if !errors.Is(err, client.ErrBadResponse) {
				t.Errorf("%+v: err = %v, want ErrBadResponse", a, err)
			}
			if n > a.SizeBytes+1 {
				t.Errorf("%+v: copied %d bytes, more than size+1", a, n)
			}
		}
	})

	t.Run("not found and no URL", func(t *testing.T) {
		other.srv.Close()
		a := good
		a.URL = "/v1/nothing"
		if _, err := c.DownloadArtifact(ctx, a, io.Discard); airlock.ErrorCode(err) != airlock.ENOTFOUND {
			t.Errorf("err = %v, want not_found", err)
		}
		a.URL = ""
		if _, err := c.DownloadArtifact(ctx, a, io.Discard); airlock.ErrorCode(err) != airlock.EINVALID {
			t.Errorf("no URL: err = %v, want invalid", err)
		}
		a.URL = "file:///etc/passwd"
		if _, err := c.DownloadArtifact(ctx, a, io.Discard); airlock.ErrorCode(err) != airlock.EINVALID {
			t.Errorf("file URL: err = %v, want invalid", err)
		}
	})
}

func TestRedirectDropsKey(t *testing.T) {
	target := newFakeAPI(t)
	redirector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target.srv.URL+"/v1/artifacts/r1?token=signed", http.StatusFound)
	}))
	defer redirector.Close()
	c := newClient(t, redirector.URL, testKey)
	a := airlock.Artifact{URL: "/v1/artifacts/r1"}
	var b strings.Builder
	if _, err := c.DownloadArtifact(context.Background(), a, &b); err != nil {
		t.Fatal(err)
	}
	if b.String() != string(artifactBytes) {
		t.Errorf("body %q", b.String())
	}
	if auth := target.auth("/v1/artifacts/r1"); auth != "" {
		t.Errorf("key followed the redirect to another host: %q", auth)
	}
}

func TestHealth(t *testing.T) {
	f := newFakeAPI(t)
	if err := newClient(t, f.srv.URL, "").Health(context.Background()); err != nil {
		t.Errorf("Health = %v", err)
	}
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeProblem(w, 503, "draining", "Service Unavailable", "node is draining", "unavailable")
	}))
	defer down.Close()
	err := newClient(t, down.URL, "").Health(context.Background())
	if airlock.ErrorCode(err) != airlock.EUNAVAILABLE {
		t.Errorf("Health(down) = %v, want unavailable", err)
	}
	down.Close()
	err = newClient(t, down.URL, "").Health(context.Background())
	var ce *client.Error
	if err == nil || errors.As(err, &ce) {
		t.Errorf("Health(closed) = %v, want a transport error", err)
	}
}

func TestContextCanceled(t *testing.T) {
	f := newFakeAPI(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := newClient(t, f.srv.URL, testKey).Execute(ctx, airlock.ExecuteRequest{Language: "python", Code: "1"})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
}

func TestUnknownProblemCode(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeProblem(w, 404, "gone", "Not Found", "no such thing", "weird_code")
	}))
	defer srv.Close()
	_, err := newClient(t, srv.URL, testKey).Execution(context.Background(), "x")
	if airlock.ErrorCode(err) != airlock.ENOTFOUND {
		t.Errorf("code = %q, want not_found from the status", airlock.ErrorCode(err))
	}
}
