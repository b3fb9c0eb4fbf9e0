package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/teststack"
	"github.com/airlockhq/airlock/service/session"
)

// sessionServer runs the real session service (gVisor, SQLite, HTTP) and
// returns its URL and a tenant's key, or skips.
func sessionServer(t *testing.T) (string, string) {
	t.Helper()
	st := teststack.New(t, teststack.Options{Session: func(c *session.Config) {
		c.Sizes = map[airlock.SessionSize]session.Size{airlock.SizeSmall: {CPUs: 1, MemoryBytes: 1 << 30, DiskBytes: 256 << 20, Pids: 256}}
	}})
	tn := st.NewTenant(t, "cli")
	return st.URL, tn.Key
}

// cli runs a subcommand with the given stdin and returns its output and
// exit status.
func cli(t *testing.T, run func(context.Context, []string, stdio) error, stdin string, args ...string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	err := run(ctx, args, stdio{in: strings.NewReader(stdin), out: &out, err: &errb})
	var ee exitError
	var ue *usageErr
	if err != nil && !errors.As(err, &ee) && !errors.As(err, &ue) {
		t.Fatalf("%v: %v", args, err)
	}
	return out.String(), errb.String(), exitStatus(err, nil, &errb)
}

// The session commands end to end: create, cp both ways, exec (streaming,
// exit status), repl (state between cells, a figure saved), ls, rm.
func TestSessionCommands(t *testing.T) {
	url, key := sessionServer(t)
	srv := []string{"--url", url, "--key", key}
	out, errOut, code := cli(t, runSession, "", append([]string{"create", "--timeout", "300"}, srv...)...)
	id := strings.TrimSpace(out)
	if code != 0 || len(id) != 32 {
		t.Fatalf("create: %q %q %d", out, errOut, code)
	}

	local := t.TempDir()
	csv := filepath.Join(local, "data.csv")
	os.WriteFile(csv, []byte("x,y\n1,2\n3,4\n"), 0o644)
	if _, errOut, code := cli(t, runCp, "", append([]string{csv, id + ":in/"}, srv...)...); code != 0 {
		t.Fatalf("cp up: %s", errOut)
	}
	out, errOut, code = cli(t, runExec, "", append(srv, id, "--", "sh", "-c", "wc -l < in/data.csv; echo err >&2; exit 7")...)
	if code != 7 || strings.TrimSpace(out) != "3" || errOut != "err\n" {
		t.Fatalf("exec: %q %q %d", out, errOut, code)
	}
	out, _, code = cli(t, runExec, "hello", append(srv, "-i", "--shell", id, "tr a-z A-Z > up.txt; cat up.txt")...)
	if code != 0 || out != "HELLO" {
		t.Fatalf("exec with stdin: %q %d", out, code)
	}
	if _, errOut, code := cli(t, runCp, "", append([]string{id + ":up.txt", local}, srv...)...); code != 0 {
		t.Fatalf("cp down: %s", errOut)
	}
	if b, _ := os.ReadFile(filepath.Join(local, "up.txt")); string(b) != "HELLO" {
		t.Fatalf("downloaded %q", b)
	}
	if out, _, code := cli(t, runCp, "", append([]string{id + ":up.txt", "-"}, srv...)...); code != 0 || out != "HELLO" {
		t.Fatalf("cp to stdout: %q", out)
	}
	if _, errOut, code := cli(t, runCp, "", append([]string{id + ":nope.txt", local}, srv...)...); code == 0 || !strings.Contains(errOut, "no such file") {
		t.Fatalf("cp of a missing file: %q %d", errOut, code)
	}
	if m, _ := filepath.Glob(filepath.Join(local, ".airlock-cp-*")); len(m) != 0 {
		t.Fatalf("a failed download left %v", m)
	}

	script := "import pandas as pd\ndf = pd.read_csv('in/data.csv')\nfor c in df.columns:\n    print(c)\n\nimport matplotlib.pyplot as plt\nplt.plot(df.x, df.y)\ndf.y.sum()\n1/0\n"
	figs := t.TempDir()
	out, errOut, code = cli(t, runRepl, script, append(srv, "--out", figs, id)...)
	if code != 0 || !strings.HasPrefix(out, "x\ny\n[<matplotlib.lines.Line2D") || !strings.Contains(out, "6\n") || !strings.Contains(errOut, "ZeroDivisionError") {
		t.Fatalf("repl: %q %q %d", out, errOut, code)
	}
	if b, err := os.ReadFile(filepath.Join(figs, "figure-1.png")); err != nil || !bytes.HasPrefix(b, []byte("\x89PNG")) {
		t.Fatalf("figure: %v", err)
	}

	out, _, code = cli(t, runSession, "", append([]string{"ls", "--json"}, srv...)...)
	var list []airlock.Session
	if code != 0 || json.Unmarshal([]byte(out), &list) != nil || len(list) != 1 || list[0].ID != id {
		t.Fatalf("ls: %s", out)
	}
	if out, _, code := cli(t, runSession, "", append([]string{"rm", id}, srv...)...); code != 0 || out != id+" destroyed\n" {
		t.Fatalf("rm: %q", out)
	}
	if _, errOut, code := cli(t, runExec, "", append(srv, id, "--", "true")...); code != exitAirlockFailed || !strings.Contains(errOut, "has ended") {
		t.Fatalf("exec after rm: %q %d", errOut, code)
	}
}

func TestOpensBlock(t *testing.T) {
	for code, want := range map[string]bool{
		"x = 1":                false,
		"for i in range(3):":   true,
		"f(1,":                 true,
		"s = '''doc":           true,
		"s = '''doc'''":        false,
		"d = {'a': [1, 2]}":    false,
		"x = 1  # a comment (": false,
		"total = 1 + \\":       true,
		"function f() {":       true,
		"const s = `multi":     true,
		"print('a (b')":        false,
		"print(\"it's\")":      false,
	} {
		if got := opensBlock(code); got != want {
			t.Errorf("opensBlock(%q) = %v", code, got)
		}
	}
	for arg, want := range map[string]string{"abc:x": "abc", "abc:": "abc", "./a:b": "", "/x:y": "", "a b:c": ""} {
		id, _, ok := splitRemote(arg)
		if (want != "") != ok || id != want {
			t.Errorf("splitRemote(%q) = %q %v", arg, id, ok)
		}
	}
}

// snapshot create, session create --from-snapshot, pause, resume, fork,
// snapshot ls and rm through the CLI.
func TestSnapshotCommands(t *testing.T) {
	url, key := sessionServer(t)
	srv := []string{"--url", url, "--key", key}
	out, _, code := cli(t, runSession, "", append([]string{"create", "--image", "base"}, srv...)...)
	id := strings.TrimSpace(out)
	if code != 0 {
		t.Fatalf("create: %d", code)
	}
	cli(t, runExec, "", append(srv, "--shell", id, "echo kept > k.txt")...)
	out, errOut, code := cli(t, runSnapshot, "", append([]string{"create", id, "--name", "cli"}, srv...)...)
	snap := strings.TrimSpace(out)
	if code != 0 || snap == "" {
		t.Fatalf("snapshot create: %q %q %d", out, errOut, code)
	}
	if out, _, code := cli(t, runSnapshot, "", append([]string{"ls"}, srv...)...); code != 0 || !strings.Contains(out, snap) || !strings.Contains(out, "workspace") {
		t.Fatalf("snapshot ls: %q", out)
	}
	if out, errOut, code := cli(t, runSession, "", append([]string{"pause", id}, srv...)...); code != 0 || out != id+" paused\n" {
		t.Fatalf("pause: %q %q", out, errOut)
	}
	if out, errOut, code := cli(t, runSession, "", append([]string{"resume", id}, srv...)...); code != 0 || out != id+" ready\n" {
		t.Fatalf("resume: %q %q", out, errOut)
	}
	out, errOut, code = cli(t, runSession, "", append([]string{"fork", id, "--count", "2"}, srv...)...)
	forks := strings.Fields(out)
	if code != 0 || len(forks) != 2 {
		t.Fatalf("fork: %q %q", out, errOut)
	}
	out, _, code = cli(t, runSession, "", append([]string{"create", "--from-snapshot", snap}, srv...)...)
	restored := strings.TrimSpace(out)
	for _, s := range append(forks, restored, id) {
		if out, _, code := cli(t, runExec, "", append(srv, s, "--", "cat", "k.txt")...); code != 0 || out != "kept\n" {
			t.Errorf("session %s: %q %d", s, out, code)
		}
	}
	if out, _, code := cli(t, runSnapshot, "", append([]string{"rm", snap}, srv...)...); code != 0 || out != snap+" deleted\n" {
		t.Fatalf("snapshot rm: %q", out)
	}
	cli(t, runSession, "", append(append([]string{"rm"}, append(forks, restored, id)...), srv...)...)
}
