package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/sqlite"
)

func TestTenantSetFirstParty(t *testing.T) {
	cliEnv(t)
	dir := filepath.Join(t.TempDir(), "state")
	if _, errs, code := runCLI(t, runTenant, "", "create", "acme", "--state-dir", dir); code != 0 {
		t.Fatalf("create: %d %s", code, errs)
	}
	floor := func() (bool, airlock.Isolation) {
		t.Helper()
		db, err := sqlite.Open(context.Background(), sqlite.Config{Path: filepath.Join(dir, "airlock.db")})
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		tn, err := db.TenantByName(context.Background(), "acme")
		if err != nil {
			t.Fatal(err)
		}
		return tn.FirstParty, tn.IsolationFloor()
	}
	if fp, fl := floor(); fp || fl != airlock.IsolationKernel {
		t.Fatalf("a new tenant: first-party %v, floor %s", fp, fl)
	}
	out, errs, code := runCLI(t, runTenant, "", "set", "acme", "--first-party", "--state-dir", dir)
	if code != 0 || !strings.Contains(out, "first-party true, isolation floor container") {
		t.Fatalf("set --first-party: %d %q %q", code, out, errs)
	}
	if fp, fl := floor(); !fp || fl != airlock.IsolationContainer {
		t.Errorf("after set: first-party %v, floor %s", fp, fl)
	}
	if out, _, code := runCLI(t, runTenant, "", "ls", "--state-dir", dir); code != 0 || !strings.Contains(out, "true") {
		t.Errorf("ls does not show the tenant first-party: %q", out)
	}
	if out, errs, code := runCLI(t, runTenant, "", "set", "--first-party=false", "acme", "--state-dir", dir); code != 0 || !strings.Contains(out, "isolation floor kernel") {
		t.Fatalf("set --first-party=false: %d %q %q", code, out, errs)
	}
	if fp, _ := floor(); fp {
		t.Errorf("still first-party after --first-party=false")
	}
	for _, tt := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"set", "acme"}, 2, "something to set"},
		{[]string{"set", "--first-party"}, 2, "one NAME"},
		{[]string{"set", "nobody", "--first-party"}, 1, "no such tenant"},
		{[]string{"set", "acme", "--first-party=maybe"}, 2, ""},
	} {
		_, errs, code := runCLI(t, runTenant, "", append(tt.args, "--state-dir", dir)...)
		if code != tt.code || !strings.Contains(errs, tt.msg) {
			t.Errorf("%v: exit %d %q, want %d and %q", tt.args, code, errs, tt.code, tt.msg)
		}
	}
}

func TestTenantSetGuard(t *testing.T) {
	cliEnv(t)
	dir := filepath.Join(t.TempDir(), "state")
	if _, errs, code := runCLI(t, runTenant, "", "create", "acme", "--state-dir", dir); code != 0 {
		t.Fatalf("create: %d %s", code, errs)
	}
	policy := func() airlock.GuardPolicy {
		t.Helper()
		db, err := sqlite.Open(context.Background(), sqlite.Config{Path: filepath.Join(dir, "airlock.db")})
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		tn, err := db.TenantByName(context.Background(), "acme")
		if err != nil {
			t.Fatal(err)
		}
		return tn.Guard
	}
	if p := policy(); p != "" || p.Effective() != airlock.GuardWarn {
		t.Fatalf("a new tenant's guard: %q (in force %s), want the default warn", p, p.Effective())
	}
	for _, p := range []airlock.GuardPolicy{airlock.GuardBlock, airlock.GuardOff, airlock.GuardWarn} {
		out, errs, code := runCLI(t, runTenant, "", "set", "acme", "--guard", string(p), "--state-dir", dir)
		if code != 0 || !strings.Contains(out, "guard "+string(p)) {
			t.Fatalf("set --guard %s: %d %q %q", p, code, out, errs)
		}
		if got := policy(); got != p {
			t.Errorf("after --guard %s the store has %q", p, got)
		}
	}
	if _, errs, code := runCLI(t, runTenant, "", "set", "acme", "--guard", "strict", "--state-dir", dir); code != 2 || !strings.Contains(errs, "off, warn or block") {
		t.Errorf("--guard strict: exit %d %q, want 2 and the policies", code, errs)
	}
	if got := policy(); got != airlock.GuardWarn {
		t.Errorf("a refused --guard changed the policy to %q", got)
	}
}
