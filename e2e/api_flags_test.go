package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestAirlockdAPIFlags starts the real airlockd with --public-url and
// --metrics-key and checks them from outside: /metrics needs the key (a
// tenant's API key does not open it), artifact URLs are built on the
// public URL with its base path and work on the server, the reference
// route /v1/sandbox/execute runs code, and request bodies are strict. A
// bad --public-url or --metrics-key stops airlockd before it starts.
func TestAirlockdAPIFlags(t *testing.T) {
	n := newTestNode(t, nodeOptions{name: "apiflags"})
	tmp, parent, bin, runsc := n.dir, n.parent, n.bin, n.runsc
	base := n.args("--pool-max", "0", "--warm", "", "--warm-sessions", "", "--no-snapshots")

	for _, bad := range [][]string{
		{"--public-url", "https://airlock.example.com/base?x=1"},
		{"--public-url", "airlock.example.com"},
		{"--metrics-key", "short"},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		out, err := exec.CommandContext(ctx, bin, append(append([]string{}, base...), bad...)...).CombinedOutput()
		cancel()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(string(out), bad[0]) {
			t.Errorf("airlockd %v: %v, %s; want exit status 2 naming the flag", bad, err, out)
		}
	}

	const metricsKey = "e2e-metrics-key-0123456789abcdef"
	d := n.track(startDaemon(t, bin, append(base, "--public-url", "https://airlock.example.com/base/", "--metrics-key", metricsKey)))
	key := n.key()

	// /metrics: the key opens it, nothing else does.
	send(t, "GET", d.url+"/metrics", "", nil).problem(t, http.StatusUnauthorized)
	send(t, "GET", d.url+"/metrics", key, nil).problem(t, http.StatusUnauthorized)
	if r := send(t, "GET", d.url+"/metrics", metricsKey, nil); r.status != 200 || !bytes.Contains(r.body, []byte("go_goroutines")) {
		t.Errorf("GET /metrics with the key: %d %.200s", r.status, r.body)
	}

	// The reference route, with an artifact on the public URL.
	r := send(t, "POST", d.url+"/v1/sandbox/execute", key,
		strings.NewReader(`{"language": "bash", "code": "echo hi; echo chart > output.txt", "timeout_sec": 15, "allow_network": false}`))
	if r.status != 200 {
		t.Fatalf("POST /v1/sandbox/execute: %d %.300s", r.status, r.body)
	}
	var res struct {
		ExitCode     *int    `json:"exit_code"`
		Stdout       *string `json:"stdout"`
		Stderr       *string `json:"stderr"`
		DurationMS   *int64  `json:"duration_ms"`
		PeakMemoryMB *int64  `json:"peak_memory_mb"`
		Artifacts    []struct {
			ID        string `json:"id"`
			Filename  string `json:"filename"`
			SizeBytes int64  `json:"size_bytes"`
			URL       string `json:"url"`
		} `json:"artifacts"`
	}
	if err := json.Unmarshal(r.body, &res); err != nil {
		t.Fatal(err)
	}
	if res.ExitCode == nil || *res.ExitCode != 0 || res.Stdout == nil || *res.Stdout != "hi\n" || res.Stderr == nil ||
		res.DurationMS == nil || res.PeakMemoryMB == nil || len(res.Artifacts) != 1 {
		t.Fatalf("reference response: %s", r.body)
	}
	a := res.Artifacts[0]
	want := "https://airlock.example.com/base/v1/artifacts/" + a.ID + "?"
	if a.Filename != "output.txt" || a.SizeBytes != 6 || !strings.HasPrefix(a.URL, want) {
		t.Errorf("artifact %+v, want its URL to start %q", a, want)
	}
	// A proxy at the public URL would strip /base and pass the rest on.
	u, err := url.Parse(a.URL)
	if err != nil {
		t.Fatal(err)
	}
	if got := send(t, "GET", d.url+strings.TrimPrefix(u.Path, "/base")+"?"+u.RawQuery, "", nil); got.status != 200 || string(got.body) != "chart\n" {
		t.Errorf("artifact through its signed URL: %d %q", got.status, got.body)
	}

	// Strict bodies, through the real server.
	p := send(t, "POST", d.url+"/v1/execute", key, strings.NewReader(`{"language": "bash", "code": "true", "Timeout_Sec": 5}`)).problem(t, 400)
	if p.Type != "/problems/unknown-field" || !strings.Contains(p.Detail, `"Timeout_Sec"`) {
		t.Errorf("unknown member: %+v", p)
	}
	p = send(t, "POST", d.url+"/v1/sandbox/execute", key, strings.NewReader(`{"language": "bash", "code": "true", "code": "false"}`)).problem(t, 400)
	if p.Type != "/problems/duplicate-field" || !strings.Contains(p.Detail, `"code"`) {
		t.Errorf("duplicate member: %+v", p)
	}

	d.stop(t)
	if after := observe(t, runsc, tmp, parent, 0); !after.empty() {
		t.Errorf("left after a clean stop: %s", after)
	}
}

// send makes one request with an optional bearer key and reads the answer.
func send(t *testing.T, method, u, key string, body io.Reader) rawResponse {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, u, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return rawResponse{status: resp.StatusCode, header: resp.Header, body: b}
}
