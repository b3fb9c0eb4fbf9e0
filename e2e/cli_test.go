package e2e_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// cliRun is one run of the airlock CLI.
type cliRun struct {
	stdout, stderr string
	code           int
}

// TestCLI is the CLI as a user meets it, against a real airlockd: login
// stores a profile (mode 0600) from a key on stdin, so that the client
// commands need no sudo, flags or environment; run prints the program's
// output and passes its exit status through; executions ls (-o json and
// -o table) lists the runs and executions show prints one; usage prints
// the tenant's quotas; a key of another tenant cannot see the execution,
// and a revoked key is refused, each with a clear message and exit 1.
func TestCLI(t *testing.T) {
	n, d := startNode(t, nodeOptions{name: "cli"}, quiet...)
	cli := buildCLI(t, t.TempDir())
	home := t.TempDir()
	work := t.TempDir()
	// Nothing from the test's own environment: no URL, no key, and a
	// state directory without default.key, so only the profile can serve.
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "XDG_CONFIG_HOME=" + filepath.Join(home, "config"),
		"AIRLOCK_STATE_DIR=" + filepath.Join(home, "no-state")}
	airlock := func(stdin string, args ...string) cliRun {
		t.Helper()
		cmd := exec.Command(cli, args...)
		cmd.Env, cmd.Dir = env, work
		cmd.Stdin = strings.NewReader(stdin)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		r := cliRun{stdout: out.String(), stderr: errb.String()}
		var ee *exec.ExitError
		switch {
		case errors.As(err, &ee):
			r.code = ee.ExitCode()
		case err != nil:
			t.Fatalf("airlock %v: %v", args, err)
		}
		return r
	}
	ok := func(r cliRun, what string) cliRun {
		t.Helper()
		if r.code != 0 {
			t.Fatalf("%s: exit %d\nstdout: %s\nstderr: %s", what, r.code, r.stdout, r.stderr)
		}
		return r
	}

	// Before login: no key, the server says so, exit 1.
	if r := airlock("", "executions", "ls", "--url", d.url); r.code != 1 || !strings.Contains(r.stderr, "HTTP 401") {
		t.Errorf("executions ls before login: exit %d, stderr %q; want 1 and the server's 401", r.code, r.stderr)
	}
	// A wrong key is refused at login, and no profile is written.
	if r := airlock("alk_not_a_key\n", "login", "--url", d.url); r.code != 1 || !strings.Contains(r.stderr, "did not take the key") {
		t.Errorf("login with a bad key: exit %d, stderr %q", r.code, r.stderr)
	}
	profiles := filepath.Join(home, "config", "airlock", "profiles.json")
	if _, err := os.Stat(profiles); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused login wrote %s: %v", profiles, err)
	}
	ok(airlock(n.key()+"\n", "login", "--url", d.url), "login")
	if fi, err := os.Stat(profiles); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("profile file: %v, mode %v; want 0600", err, fi)
	}

	// run: the program's output, and its exit status passed through.
	if err := os.WriteFile(filepath.Join(work, "hello.sh"), []byte("echo hello from the sandbox\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := ok(airlock("", "run", "hello.sh"), "run hello.sh"); r.stdout != "hello from the sandbox\n" {
		t.Errorf("run hello.sh printed %q", r.stdout)
	}
	if r := airlock("echo to stderr >&2; exit 3", "run", "-l", "bash", "-"); r.code != 3 || !strings.Contains(r.stderr, "to stderr") {
		t.Errorf("run exiting 3: exit %d, stderr %q", r.code, r.stderr)
	}

	// executions ls -o json: both runs, newest first.
	var page struct {
		Executions []struct {
			ID       string `json:"execution_id"`
			ExitCode int    `json:"exit_code"`
			Language string `json:"language"`
		} `json:"executions"`
	}
	r := ok(airlock("", "executions", "ls", "-o", "json"), "executions ls -o json")
	if err := json.Unmarshal([]byte(r.stdout), &page); err != nil || len(page.Executions) != 2 {
		t.Fatalf("executions ls -o json: %v, %d executions:\n%s", err, len(page.Executions), r.stdout)
	}
	newest, first := page.Executions[0], page.Executions[1]
	if newest.ExitCode != 3 || first.ExitCode != 0 || first.Language != "bash" {
		t.Errorf("executions: newest exit %d, oldest exit %d in %q", newest.ExitCode, first.ExitCode, first.Language)
	}
	r = ok(airlock("", "executions", "ls", "-o", "table"), "executions ls -o table")
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "ID ") || !strings.HasPrefix(lines[1], newest.ID) || !strings.HasPrefix(lines[2], first.ID) {
		t.Errorf("executions ls -o table:\n%s", r.stdout)
	}
	// Paging with the API's cursor: one a page, the next page's command on stderr.
	r = ok(airlock("", "executions", "ls", "--limit", "1"), "executions ls --limit 1")
	if !strings.Contains(r.stdout, newest.ID) || strings.Contains(r.stdout, first.ID) || !strings.Contains(r.stderr, "--before "+newest.ID) {
		t.Errorf("executions ls --limit 1:\nstdout %s\nstderr %s", r.stdout, r.stderr)
	}

	// executions show, as a table and as JSON.
	r = ok(airlock("", "executions", "show", first.ID), "executions show")
	if !strings.Contains(r.stdout, "execution_id") || !strings.Contains(r.stdout, first.ID) || !strings.Contains(r.stdout, "hello from the sandbox") {
		t.Errorf("executions show:\n%s", r.stdout)
	}
	var one struct {
		ID     string `json:"execution_id"`
		Stdout string `json:"stdout"`
	}
	r = ok(airlock("", "executions", "show", first.ID, "-o", "json"), "executions show -o json")
	if err := json.Unmarshal([]byte(r.stdout), &one); err != nil || one.ID != first.ID || one.Stdout != "hello from the sandbox\n" {
		t.Errorf("executions show -o json: %v %q", err, r.stdout)
	}

	// usage, as a table and as JSON.
	r = ok(airlock("", "usage"), "usage")
	if !strings.HasPrefix(r.stdout, "QUOTA") || !strings.Contains(r.stdout, "executions_per_minute") {
		t.Errorf("usage:\n%s", r.stdout)
	}
	var u struct {
		Quotas []struct {
			Quota string `json:"quota"`
		} `json:"quotas"`
	}
	r = ok(airlock("", "usage", "-o", "json"), "usage -o json")
	if err := json.Unmarshal([]byte(r.stdout), &u); err != nil || len(u.Quotas) == 0 {
		t.Errorf("usage -o json: %v %q", err, r.stdout)
	}

	// Another tenant's key, made by the operator with airlock admin: the
	// execution is not its to see.
	adminKey, err := os.ReadFile(filepath.Join(n.dir, "admin.key"))
	if err != nil {
		t.Fatal(err)
	}
	admin := []string{"--admin-key", strings.TrimSpace(string(adminKey)), "--url", d.url}
	ok(airlock("", append([]string{"admin", "tenant", "create", "other"}, admin...)...), "admin tenant create")
	other := strings.TrimSpace(ok(airlock("", append([]string{"admin", "key", "create", "other", "--name", "cli"}, admin...)...), "admin key create").stdout)
	if r := airlock("", "executions", "show", first.ID, "--key", other); r.code != 1 || !strings.Contains(r.stderr, "HTTP 404") || r.stdout != "" {
		t.Errorf("executions show with another tenant's key: exit %d\nstdout %q\nstderr %q; want 1 and 404", r.code, r.stdout, r.stderr)
	}
	if r := airlock("", "executions", "ls", "-o", "json", "--key", other); r.code != 0 || strings.Contains(r.stdout, first.ID) {
		t.Errorf("executions ls with another tenant's key: exit %d, lists %s:\n%s", r.code, first.ID, r.stdout)
	}

	// A key made and revoked by the tenant itself is refused at once.
	var made struct {
		ID  string `json:"key_id"`
		Key string `json:"key"`
	}
	r = ok(airlock("", "keys", "create", "--name", "temp", "-o", "json"), "keys create")
	if err := json.Unmarshal([]byte(r.stdout), &made); err != nil || made.Key == "" {
		t.Fatalf("keys create -o json: %v %q", err, r.stdout)
	}
	ok(airlock("", "usage", "--key", made.Key), "usage with the new key")
	ok(airlock("", "keys", "revoke", made.ID), "keys revoke")
	if r := airlock("", "usage", "--key", made.Key); r.code != 1 || !strings.Contains(r.stderr, "HTTP 401") {
		t.Errorf("usage with the revoked key: exit %d, stderr %q; want 1 and 401", r.code, r.stderr)
	}
	if r := airlock("print(1)", "run", "-l", "python", "-", "--key", made.Key); r.code != 125 || !strings.Contains(r.stderr, "HTTP 401") {
		t.Errorf("run with the revoked key: exit %d, stderr %q; want 125 and 401", r.code, r.stderr)
	}
	r = ok(airlock("", "keys", "ls"), "keys ls")
	if !strings.Contains(r.stdout, made.ID) || strings.Contains(r.stdout, made.Key) {
		t.Errorf("keys ls:\n%s", r.stdout)
	}

	// -h is help, never an argument: exit 0, nothing written.
	if r := airlock("", "master-key", "generate", "-h"); r.code != 0 || !strings.Contains(r.stdout, "usage:") {
		t.Errorf("master-key generate -h: exit %d %q", r.code, r.stdout)
	}
	if _, err := os.Stat(filepath.Join(work, "-h")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("master-key generate -h wrote a file named -h: %v", err)
	}
}
