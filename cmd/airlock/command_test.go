package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// airlockCLI runs a command line through the tree as main does.
func airlockCLI(t *testing.T, stdin string, args ...string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	code := execute(context.Background(), tree(), args, stdio{in: strings.NewReader(stdin), out: &out, err: &errb})
	return out.String(), errb.String(), code
}

// isolate gives a test its own config directory and nothing from the
// environment that names a server or a key; the URL goes nowhere.
func isolate(t *testing.T) {
	t.Helper()
	cliEnv(t)
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	t.Setenv(envURL, "http://127.0.0.1:1")
	t.Setenv(envProfile, "")
	t.Setenv(envAdminKey, "")
}

// Help is asked for with --help, -h, -help or 'help': it goes to stdout
// and exits 0, on the root, on a group and on every leaf.
func TestHelpExitsZero(t *testing.T) {
	isolate(t)
	for _, args := range [][]string{
		{"--help"}, {"-h"}, {"help"}, {"help", "session"}, {"help", "node", "image"},
		{"session", "-h"}, {"session", "create", "--help"}, {"node", "-h"}, {"node", "image", "build", "-h"},
		{"admin", "tenant", "set", "acme", "-h"}, {"executions", "ls", "-h"}, {"usage", "-h"}, {"login", "-h"},
		{"completion", "-h"}, {"run", "x.py", "-help"}, {"keys", "-h"}, {"profile", "-h"}, {"node", "bench", "-h"},
	} {
		out, errs, code := airlockCLI(t, "", args...)
		if code != 0 || !strings.Contains(out, "usage") || errs != "" {
			t.Errorf("airlock %s: exit %d, stdout %d bytes, stderr %q; want 0, help on stdout", strings.Join(args, " "), code, len(out), errs)
		}
	}
	out, _, _ := airlockCLI(t, "", "--help")
	for _, want := range []string{"getting started:", "login", "executions", "admin", "node", "completion"} {
		if !strings.Contains(out, want) {
			t.Errorf("airlock --help lacks %q:\n%s", want, out)
		}
	}
	for _, hidden := range []string{"\n  image ", "\n  master-key ", "\n  bench ", "__complete"} {
		if strings.Contains(out, hidden) {
			t.Errorf("airlock --help lists the hidden %q:\n%s", hidden, out)
		}
	}
	if out, _, code := airlockCLI(t, "", "--version"); code != 0 || !strings.HasPrefix(out, "airlock ") {
		t.Errorf("--version: %d %q", code, out)
	}
}

// -h is never an argument: 'airlock master-key generate -h' used to
// write a key to a file named -h.
func TestHelpIsNeverAnArgument(t *testing.T) {
	isolate(t)
	dir := t.TempDir()
	t.Chdir(dir)
	for _, args := range [][]string{
		{"master-key", "generate", "-h"}, {"node", "master-key", "generate", "-h"}, {"node", "master-key", "generate", "--help"},
		{"node", "master-key", "id", "-h"}, {"session", "rm", "-h"}, {"snapshot", "rm", "-h"}, {"keys", "revoke", "-h"},
		{"profile", "rm", "-h"}, {"admin", "key", "revoke", "-h"}, {"cp", "-h", "x:y"},
	} {
		out, _, code := airlockCLI(t, "", args...)
		if code != 0 || !strings.Contains(out, "usage") {
			t.Errorf("airlock %s: exit %d %q", strings.Join(args, " "), code, out)
		}
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("help wrote %v", ents)
	}
	// After "--" it belongs to the command run in the session.
	if !wantsHelp([]string{"S", "-h"}) || wantsHelp([]string{"S", "--", "ls", "-h"}) || wantsHelp([]string{"--shell", "S", "ls -h"}) {
		t.Error("wantsHelp")
	}
}

// Usage errors exit 2 on every command, with a message and a hint, and
// send nothing to a server (the URL goes nowhere: a call would exit 1).
func TestUsageErrorsExitTwo(t *testing.T) {
	isolate(t)
	for _, args := range [][]string{
		{}, {"nosuch"}, {"--nosuch"}, {"node"}, {"node", "nosuch"}, {"help", "nosuch"},
		{"run"}, {"run", "-l", "cobol", "-"}, {"run", "--nosuch", "x.py"}, {"exec", "S"}, {"cp", "a", "b"},
		{"session"}, {"session", "nosuch"}, {"session", "create", "extra"}, {"session", "extend", "S", "soon"},
		{"snapshot"}, {"snapshot", "create"}, {"executions"}, {"executions", "show"}, {"executions", "ls", "--limit", "0"},
		{"executions", "ls", "-o", "yaml"}, {"usage", "extra"}, {"usage", "--output", "xml"}, {"events", "--limit", "9999"},
		{"keys"}, {"keys", "revoke"}, {"keys", "create", "--expires", "someday"}, {"login"}, {"login", "extra", "--url", "http://x"},
		{"logout", "extra"}, {"profile"}, {"profile", "use"}, {"completion"}, {"completion", "tcsh"},
		{"admin"}, {"admin", "tenant"}, {"admin", "tenant", "create", "--admin-key", "k"}, {"admin", "key", "ls", "a", "b", "--admin-key", "k"},
		{"admin", "tenant", "set", "acme", "--admin-key", "k"}, {"admin", "tenant", "set", "acme", "--quota", "nosuch=1", "--admin-key", "k"},
		{"admin", "nosuch", "--admin-key", "k"},
		{"node", "master-key"}, {"node", "master-key", "generate"}, {"node", "image"}, {"version", "extra"}, {"mcp", "extra"},
	} {
		_, errs, code := airlockCLI(t, "", args...)
		if code != exitUsage || errs == "" {
			t.Errorf("airlock %s: exit %d, stderr %q; want 2 and a message", strings.Join(args, " "), code, errs)
		}
	}
}

// The old spellings work for one release, hidden, with one line on stderr.
func TestDeprecatedSpellings(t *testing.T) {
	isolate(t)
	for _, c := range []struct{ old, now string }{
		{"image", "node image"}, {"master-key", "node master-key"}, {"bench", "node bench"},
		{"bench-backends", "node bench-backends"}, {"baseline", "node baseline"},
	} {
		out, errs, code := airlockCLI(t, "", c.old, "-h")
		if code != 0 || !strings.Contains(out, "usage") || strings.Count(errs, "\n") != 1 || !strings.Contains(errs, "use 'airlock "+c.now+"'") {
			t.Errorf("airlock %s -h: exit %d, stderr %q", c.old, code, errs)
		}
	}
	dir := t.TempDir()
	key := filepath.Join(dir, "mk")
	out, errs, code := airlockCLI(t, "", "master-key", "generate", key)
	if code != 0 || !strings.HasPrefix(out, "mk-") || !strings.Contains(errs, "deprecated") {
		t.Errorf("master-key generate: %d %q %q", code, out, errs)
	}
	if id, _, code := airlockCLI(t, "", "node", "master-key", "id", key); code != 0 || id != out {
		t.Errorf("node master-key id: %d %q, want %q", code, id, out)
	}
	// The old local events, by its flags.
	if _, errs, _ := airlockCLI(t, "", "events", "--state-dir", dir); !strings.Contains(errs, "use 'airlock node events'") {
		t.Errorf("events --state-dir: %q", errs)
	}
}

func TestCompletion(t *testing.T) {
	root := tree()
	for _, tt := range []struct {
		words []string
		cur   string
		want  []string
		not   []string
	}{
		{nil, "", []string{"login", "run", "executions", "admin", "node", "completion"}, []string{"image", completeCommand}},
		{nil, "ex", []string{"exec", "executions"}, []string{"run"}},
		{[]string{"node"}, "", []string{"image", "master-key", "bench"}, nil},
		{[]string{"session"}, "cr", []string{"create"}, []string{"ls"}},
		{[]string{"executions"}, "", []string{"ls", "show"}, nil},
		{[]string{"run"}, "--ti", []string{"--timeout"}, []string{"--url"}},
		{[]string{"executions", "ls"}, "-", []string{"--limit", "--before", "--all", "-o", "--output", "--profile"}, nil},
		{[]string{"completion"}, "", []string{"bash", "zsh", "fish"}, nil},
		{[]string{"nosuch"}, "", nil, []string{"run"}},
	} {
		got := completions(root, tt.words, tt.cur)
		for _, w := range tt.want {
			if !slices.Contains(got, w) {
				t.Errorf("complete %v %q = %v, lacks %q", tt.words, tt.cur, got, w)
			}
		}
		for _, w := range tt.not {
			if slices.Contains(got, w) {
				t.Errorf("complete %v %q = %v, has %q", tt.words, tt.cur, got, w)
			}
		}
	}
	out, _, code := airlockCLI(t, "", completeCommand, "node", "ma")
	if code != 0 || out != "master-key\n" {
		t.Errorf("__complete node ma: %d %q", code, out)
	}
	// Each script is valid in its shell, where the shell is installed.
	for _, sh := range []string{"bash", "zsh", "fish"} {
		script, _, code := airlockCLI(t, "", "completion", sh)
		if code != 0 || !strings.Contains(script, "__complete") {
			t.Errorf("completion %s: %d %q", sh, code, script)
			continue
		}
		path, err := exec.LookPath(sh)
		if err != nil {
			t.Logf("%s not installed: its script is not parsed", sh)
			continue
		}
		f := filepath.Join(t.TempDir(), "airlock."+sh)
		os.WriteFile(f, []byte(script), 0o644)
		if out, err := exec.Command(path, "-n", f).CombinedOutput(); err != nil {
			t.Errorf("%s -n: %v\n%s", sh, err, out)
		}
	}
}

// loginServer answers GET /v1/usage for the tenant key and GET
// /v1/admin/tenants for the operator key, as airlockd does.
func loginServer(t *testing.T, tenantKey, adminKey string) string {
	t.Helper()
	problem := func(w http.ResponseWriter, status int, typ string) {
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(status)
		json.NewEncoder(w).Encode(map[string]any{"type": "urn:airlock:problem:" + typ, "title": typ, "status": status})
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		switch {
		case key != tenantKey && key != adminKey:
			problem(w, 401, "unauthorized")
		case r.URL.Path == "/v1/usage" && key == adminKey:
			problem(w, 403, "tenant-key-required")
		case r.URL.Path == "/v1/usage":
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(`{"tenant_id":"t-1","at":"2026-12-01T00:00:00Z","quotas":[{"quota":"sessions","unit":"sessions","window":"concurrent","limit":4,"used":1,"remaining":3,"source":"default"}]}`))
		case r.URL.Path == "/v1/admin/tenants" && key == adminKey:
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(`{"tenants":[]}`))
		default:
			problem(w, 403, "admin-role-required")
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// login checks the key and stores a profile (0600, in a 0700 directory);
// the profile then serves every command; flags beat the environment,
// which beats the profile; an operator key lands as the admin key.
func TestLoginAndProfiles(t *testing.T) {
	isolate(t)
	url := loginServer(t, "alk_tenant", "alk_admin")
	if _, errs, code := airlockCLI(t, "alk_wrong\n", "login", "--url", url); code != 1 || !strings.Contains(errs, "did not take the key") {
		t.Errorf("login with a wrong key: %d %q", code, errs)
	}
	if _, _, code := airlockCLI(t, "alk_tenant\n", "login", "--url", url); code != 0 {
		t.Fatalf("login: %d", code)
	}
	path, _ := profilesPath()
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("profiles file: %v %v", err, fi)
	}
	if fi, _ := os.Stat(filepath.Dir(path)); fi.Mode().Perm() != 0o700 {
		t.Errorf("config dir mode %v", fi.Mode().Perm())
	}
	keyFile := filepath.Join(t.TempDir(), "admin.key")
	os.WriteFile(keyFile, []byte("alk_admin\n"), 0o600)
	if _, errs, code := airlockCLI(t, "", "login", "--url", url, "--profile", "ops", "--key-file", keyFile); code != 0 || !strings.Contains(errs, "operator key") {
		t.Fatalf("login with an operator key: %d %q", code, errs)
	}
	ps, _ := loadProfiles()
	if ps.Current != "ops" || ps.Profiles["ops"].AdminKey != "alk_admin" || ps.Profiles["default"].APIKey != "alk_tenant" || ps.Profiles["default"].Tenant != "t-1" {
		t.Fatalf("profiles: %+v %+v %+v", ps, ps.Profiles["ops"], ps.Profiles["default"])
	}
	// The profile serves: usage through the default profile.
	t.Setenv(envURL, "")
	if out, errs, code := airlockCLI(t, "", "usage", "--profile", "default"); code != 0 || !strings.Contains(out, "sessions") {
		t.Errorf("usage with the profile: %d %q %q", code, out, errs)
	}
	t.Setenv(envProfile, "default")
	if out, _, code := airlockCLI(t, "", "usage", "-o", "json"); code != 0 || !strings.Contains(out, `"tenant_id": "t-1"`) {
		t.Errorf("usage with $AIRLOCK_PROFILE: %d %q", code, out)
	}
	if _, errs, code := airlockCLI(t, "", "usage", "--profile", "nosuch"); code != 1 || !strings.Contains(errs, `no profile named "nosuch"`) {
		t.Errorf("usage with a missing profile: %d %q", code, errs)
	}

	// Precedence: flag > environment > profile.
	var s serverFlags
	if s.serverURL() != url || s.apiKey() != "alk_tenant" {
		t.Errorf("from the profile: %q %q", s.serverURL(), s.apiKey())
	}
	t.Setenv(envURL, "http://env.invalid")
	t.Setenv(envAPIKey, "alk_env")
	s = serverFlags{}
	if s.serverURL() != "http://env.invalid" || s.apiKey() != "alk_env" {
		t.Errorf("from the environment: %q %q", s.serverURL(), s.apiKey())
	}
	s = serverFlags{url: "http://flag.invalid", key: "alk_flag"}
	if s.serverURL() != "http://flag.invalid" || s.apiKey() != "alk_flag" {
		t.Errorf("from the flags: %q %q", s.serverURL(), s.apiKey())
	}
	t.Setenv(envURL, "")
	t.Setenv(envAPIKey, "")
	t.Setenv(envProfile, "")
	a := adminFlags{}
	if u, k, err := a.resolve(); err != nil || u != url || k != "alk_admin" {
		t.Errorf("admin from the current profile: %q %q %v", u, k, err)
	}

	out, _, code := airlockCLI(t, "", "profile", "ls")
	if code != 0 || !strings.Contains(out, "ops") || strings.Contains(out, "alk_admin\n") {
		t.Errorf("profile ls: %d %q", code, out)
	}
	if _, _, code := airlockCLI(t, "", "profile", "use", "default"); code != 0 {
		t.Errorf("profile use: %d", code)
	}
	if _, _, code := airlockCLI(t, "", "logout"); code != 0 {
		t.Errorf("logout: %d", code)
	}
	if ps, _ := loadProfiles(); ps.Profiles["default"] != nil || ps.Profiles["ops"] == nil || ps.Current != "" {
		t.Errorf("after logout: %+v", ps)
	}
}

func TestOutputFlags(t *testing.T) {
	var b bytes.Buffer
	if err := writeRecord(&b, map[string]any{"id": "x", "n": 2, "empty": "", "nil": nil, "nested": map[string]any{"a": 1}, "list": []string{"p", "q"}}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"FIELD", "id ", "nested.a ", "list ", "p,q"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("record lacks %q:\n%s", want, b.String())
		}
	}
	if strings.Contains(b.String(), "empty") || strings.Contains(b.String(), "nil") {
		t.Errorf("record shows empty members:\n%s", b.String())
	}
	b.Reset()
	if err := writeListTable(&b, []byte(`{"entries":[{"id":"1","what":"a\u001b[2J"},{"id":"2","what":null}],"next_cursor":"2"}`)); err != nil {
		t.Fatal(err)
	}
	if got := b.String(); !strings.HasPrefix(got, "ID") || !strings.Contains(got, "a?[2J") || strings.Count(got, "\n") != 3 {
		t.Errorf("list table:\n%q", got)
	}
}
