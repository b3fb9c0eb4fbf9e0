package main

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/store/sqlite"
)

func TestValidTenantName(t *testing.T) {
	tests := []struct {
		name string
		ok   bool
	}{
		{"acme", true},
		{"a", true},
		{"team-42", true},
		{"a-", true},
		{strings.Repeat("a", 64), true},
		{strings.Repeat("a", 65), false},
		{"", false},
		{"42team", false},
		{"-acme", false},
		{"Acme", false},
		{"ac_me", false},
		{"ac me", false},
		{"acmé", false},
		{"acme\n", false},
		{"../x", false},
	}
	for _, tt := range tests {
		if err := validTenantName(tt.name); (err == nil) != tt.ok {
			t.Errorf("validTenantName(%q) = %v, want ok=%v", tt.name, err, tt.ok)
		}
	}
}

func TestTenantAndKey(t *testing.T) {
	cliEnv(t)
	dir := filepath.Join(t.TempDir(), "state")

	// Nothing to list or key before the store exists, and no store is made.
	if _, errs, code := runCLI(t, runTenant, "", "ls", "--state-dir", dir); code != 1 || !strings.Contains(errs, "no database") {
		t.Errorf("ls before create: exit %d %q", code, errs)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("ls created the state dir: %v", err)
	}

	out, errs, code := runCLI(t, runTenant, "", "create", "acme", "--state-dir", dir)
	if code != 0 || !strings.HasPrefix(out, "created tenant acme (") {
		t.Fatalf("create: exit %d %q %q", code, out, errs)
	}
	if _, errs, code := runCLI(t, runTenant, "", "create", "acme", "--state-dir", dir); code != 1 || !strings.Contains(errs, `tenant "acme" already exists`) {
		t.Errorf("duplicate: exit %d %q", code, errs)
	}
	if _, errs, code := runCLI(t, runTenant, "", "create", "Bad_Name", "--state-dir", dir); code != 1 || !strings.Contains(errs, "invalid tenant name") {
		t.Errorf("bad name: exit %d %q", code, errs)
	}
	t.Setenv(envStateDir, dir) // the default when --state-dir is absent
	runCLI(t, runTenant, "", "create", "beta")

	out, _, code = runCLI(t, runTenant, "", "ls")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(lines) != 3 || !strings.HasPrefix(lines[0], "ID") ||
		!strings.Contains(lines[1], " acme ") || !strings.Contains(lines[2], " beta ") {
		t.Errorf("ls: exit %d\n%s", code, out)
	}

	out, errs, code = runCLI(t, runKey, "", "create", "acme")
	secret := strings.TrimSuffix(out, "\n")
	if code != 0 || !strings.HasPrefix(secret, airlock.APIKeyPrefix) || strings.Contains(secret, "\n") || !strings.Contains(errs, "not shown again") {
		t.Fatalf("key create: exit %d stdout %q stderr %q", code, out, errs)
	}
	if _, errs, code := runCLI(t, runKey, "", "create", "nobody"); code != 1 || !strings.Contains(errs, `no such tenant "nobody"`) {
		t.Errorf("key for unknown tenant: exit %d %q", code, errs)
	}

	db, err := sqlite.Open(context.Background(), sqlite.Config{Path: filepath.Join(dir, "airlock.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	tn, err := db.TenantByKeyHash(context.Background(), airlock.HashAPIKey(secret))
	if err != nil || tn.Name != "acme" {
		t.Errorf("the printed key does not resolve to acme: %+v %v", tn, err)
	}

	// An E2B-format key: e2b_ and 40 hex digits, resolving like any key.
	out, _, code = runCLI(t, runKey, "", "create", "acme", "--format", "e2b")
	e2bKey := strings.TrimSuffix(out, "\n")
	if code != 0 || !regexp.MustCompile(`^e2b_[0-9a-f]{40}$`).MatchString(e2bKey) {
		t.Fatalf("key create --format e2b: exit %d stdout %q", code, out)
	}
	if tn, err := db.TenantByKeyHash(context.Background(), airlock.HashAPIKey(e2bKey)); err != nil || tn.Name != "acme" {
		t.Errorf("the e2b key does not resolve to acme: %+v %v", tn, err)
	}
	if _, _, code := runCLI(t, runKey, "", "create", "acme", "--format", "pem"); code != 2 {
		t.Errorf("key create --format pem: exit %d, want 2", code)
	}

	for _, args := range [][]string{{}, {"frob"}, {"create"}, {"create", "a", "b"}, {"ls", "x"}} {
		if _, _, code := runCLI(t, runTenant, "", args...); code != 2 {
			t.Errorf("tenant %q: exit %d, want 2", args, code)
		}
	}
	for _, args := range [][]string{{}, {"frob"}, {"create"}} {
		if _, _, code := runCLI(t, runKey, "", args...); code != 2 {
			t.Errorf("key %q: exit %d, want 2", args, code)
		}
	}
}
