package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/internal/teststack"
	"github.com/airlockhq/airlock/node"
)

// runStatus runs a subcommand and returns its output and exit status
// as airlock's main would.
func runStatus(t *testing.T, run func(context.Context, []string, stdio) error, path []string, args ...string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	err := run(ctx, args, stdio{in: strings.NewReader(""), out: &out, err: &errb})
	return out.String(), errb.String(), exitStatus(err, path, &errb)
}

// template build sends a directory as the build context and builds its
// Dockerfile, following the log; a failing step's line is named and the
// exit status is 1. session template makes a template of a session.
func TestTemplateBuildAndSessionTemplateCommands(t *testing.T) {
	st := teststack.New(t, teststack.Options{Templates: &node.TemplatesConfig{}})
	tn := st.NewTenant(t, "cli")
	srv := []string{"--url", st.URL, "--key", tn.Key}
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "sub"), 0o755)
	os.WriteFile(filepath.Join(dir, "sub", "hello.txt"), []byte("hello from the context\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte("FROM base\nCOPY sub/hello.txt /opt/hello.txt\nRUN cp /opt/hello.txt /opt/copy.txt\n"), 0o644)
	bad := filepath.Join(t.TempDir(), "Bad.Dockerfile")
	os.WriteFile(bad, []byte("FROM base\nRUN true\nRUN echo failing; exit 3\n"), 0o644)
	path := []string{"template", "build"}

	out, errOut, code := runStatus(t, runTemplate, path, append([]string{"build", dir, "--name", "built"}, srv...)...)
	if code != 0 || strings.TrimSpace(out) != "built" || !strings.Contains(errOut, "ready") {
		t.Fatalf("build: %q %q %d", out, errOut, code)
	}
	out, errOut, code = runStatus(t, runTemplate, path, append([]string{"build", "-f", bad, dir, "--name", "broken"}, srv...)...)
	if code != 1 || out != "" || !strings.Contains(errOut, "line 3") || !strings.Contains(errOut, "exit code 3") {
		t.Fatalf("a failing build: %q %q %d", out, errOut, code)
	}
	if _, errOut, code := runStatus(t, runTemplate, path, append([]string{"build", dir}, srv...)...); code != 2 {
		t.Fatalf("build without --name: %q %d", errOut, code)
	}

	c, err := client.New(client.Config{BaseURL: st.URL, APIKey: tn.Key})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	sess, _, err := c.CreateSession(ctx, airlock.CreateSessionRequest{Template: "built", TimeoutS: 300})
	if err != nil {
		t.Fatalf("a session from the built template: %v", err)
	}
	if e, err := c.Exec(ctx, sess.ID, airlock.SessionExecRequest{Shell: "cat /opt/copy.txt > made.txt"}); err != nil || e.ExitCode != 0 {
		t.Fatalf("exec: %+v %v", e, err)
	}
	out, errOut, code = runStatus(t, runSession, []string{"session", "template"}, append([]string{"template", sess.ID, "--name", "from-session", "--wait"}, srv...)...)
	if code != 0 || strings.TrimSpace(out) != "from-session" {
		t.Fatalf("session template: %q %q %d", out, errOut, code)
	}
	run, err := c.Execute(ctx, airlock.ExecuteRequest{Language: "bash", Template: "from-session", Code: "cat made.txt /opt/hello.txt"})
	if err != nil || run.Stdout != "hello from the context\nhello from the context\n" {
		t.Fatalf("a run from the session's template: %+v %v", run, err)
	}
	_, errOut, code = runStatus(t, runSession, []string{"session", "template"}, append([]string{"template", sess.ID, "--name", "from-session"}, srv...)...)
	if code != 1 || !strings.Contains(errOut, "exists") {
		t.Fatalf("a name taken: %q %d", errOut, code)
	}
	c.DeleteSession(ctx, sess.ID)
}
