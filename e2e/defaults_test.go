package e2e_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
)

// TestSingleNodeDefaults: a fresh airlockd on an empty state directory,
// given no master key, makes one there (mode 0600, with a log line that
// says to back it up), so pause, resume and fork work on the embedded
// defaults; after a restart it uses the same key and a session paused
// before resumes. Its log is JSON on request, every line; /readyz names
// each dependency; /metrics counts the requests by route pattern, not
// by path.
func TestSingleNodeDefaults(t *testing.T) {
	n := newTestNode(t, nodeOptions{name: "defaults"})
	args := append(append([]string{}, quiet...), "--egress=false", "--log-format", "json")
	d := n.start(args...)
	keyFile := filepath.Join(n.dir, "master.key")
	fi, err := os.Stat(keyFile)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("master key file: %v %v\n%s", fi, err, d.logs())
	}
	if !strings.Contains(d.logs(), "back it up") || !strings.Contains(d.logs(), keyFile) {
		t.Errorf("no log line says to back up %s:\n%s", keyFile, d.logs())
	}
	key := n.key()
	c := newClient(t, d.url, key)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	sess, _, err := c.CreateSession(ctx, airlock.CreateSessionRequest{Image: "base", TimeoutS: 3600})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.PutFile(ctx, sess.ID, "w.txt", strings.NewReader("work"), 4); err != nil {
		t.Fatal(err)
	}
	if _, err := c.PauseSession(ctx, sess.ID); err != nil {
		t.Fatalf("pause on the defaults: %v\n%s", err, d.logs())
	}
	if _, err := c.ResumeSession(ctx, sess.ID); err != nil {
		t.Fatalf("resume: %v", err)
	}
	forks, err := c.ForkSession(ctx, sess.ID, airlock.ForkRequest{Count: 1})
	if err != nil || len(forks.Sessions) != 1 {
		t.Fatalf("fork on the defaults: %+v %v", forks, err)
	}
	child := forks.Sessions[0].ID
	if e, err := c.Exec(ctx, child, airlock.SessionExecRequest{Shell: "cat w.txt"}); err != nil || e.Stdout != "work" {
		t.Fatalf("the fork's workspace: %+v %v", e, err)
	}
	if _, err := c.DeleteSession(ctx, child); err != nil {
		t.Error(err)
	}

	// /readyz: one member per dependency.
	resp := send(t, http.MethodGet, d.url+"/readyz", "", nil)
	var ready map[string]any
	if err := json.Unmarshal(resp.body, &ready); err != nil || resp.status != 200 {
		t.Fatalf("/readyz: %d %s", resp.status, resp.body)
	}
	for _, dep := range []string{"status", "store", "runsc", "images", "blobs"} {
		if ready[dep] != "ok" {
			t.Errorf("/readyz %s: %v (%s)", dep, ready[dep], resp.body)
		}
	}
	if _, ok := ready["etcd"]; ok {
		t.Errorf("/readyz names etcd on a node without a fleet: %s", resp.body)
	}

	// /metrics (open on loopback): the requests by route pattern.
	resp = send(t, http.MethodGet, d.url+"/metrics", "", nil)
	metrics := string(resp.body)
	for _, want := range []string{
		`airlock_http_requests_total{code="200",method="POST",route="/v1/sessions/{id}/pause"} 1`,
		`airlock_http_requests_total{code="200",method="GET",route="/readyz"}`,
		`airlock_http_request_duration_seconds_bucket{method="POST",route="/v1/sessions/{id}/fork",le="+Inf"} 1`,
		`airlock_build_info{`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if strings.Contains(metrics, sess.ID) {
		t.Errorf("/metrics has a session ID in a label")
	}
	// Every airlock_* metric it serves is in docs/operations.md.
	ops, err := os.ReadFile("../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range regexp.MustCompile(`(?m)^# TYPE (airlock_[a-z_]+) `).FindAllStringSubmatch(metrics, -1) {
		if !strings.Contains(string(ops), "`"+m[1]+"`") {
			t.Errorf("docs/operations.md does not list %s", m[1])
		}
	}

	// Paused across a restart: the same key opens it.
	if _, err := c.PauseSession(ctx, sess.ID); err != nil {
		t.Fatal(err)
	}
	d.stop(t)
	first := d
	d = n.start(args...)
	if !strings.Contains(d.logs(), "using this node's own master key") {
		t.Errorf("the restarted node does not use its key:\n%s", d.logs())
	}
	c = newClient(t, d.url, key)
	if _, err := c.ResumeSession(ctx, sess.ID); err != nil {
		t.Fatalf("resume after a restart: %v\n%s", err, d.logs())
	}
	if e, err := c.Exec(ctx, sess.ID, airlock.SessionExecRequest{Shell: "cat w.txt"}); err != nil || e.Stdout != "work" {
		t.Fatalf("resumed after a restart: %+v %v", e, err)
	}
	if _, err := c.DeleteSession(ctx, sess.ID); err != nil {
		t.Error(err)
	}
	d.stop(t)

	// Every line of the log, from both runs, is a JSON object.
	for _, line := range strings.Split(strings.TrimSpace(first.logs()+d.logs()), "\n") {
		var v map[string]any
		if err := json.Unmarshal([]byte(line), &v); err != nil || v["msg"] == nil {
			t.Errorf("not a JSON log line: %q", line)
		}
	}
}
