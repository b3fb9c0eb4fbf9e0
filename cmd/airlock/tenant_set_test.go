package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/store/sqlite"
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
	if strings.Contains(errs, "deprecated") {
		t.Errorf("set --first-party, which only the node command can set, was called deprecated: %q", errs)
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

func TestTenantSetIsolation(t *testing.T) {
	cliEnv(t)
	dir := filepath.Join(t.TempDir(), "state")
	if _, errs, code := runCLI(t, runTenant, "", "create", "acme", "--state-dir", dir); code != 0 {
		t.Fatalf("create: %d %s", code, errs)
	}
	stored := func() *airlock.Tenant {
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
		return tn
	}
	for _, tt := range []struct {
		args  []string
		set   airlock.Isolation
		floor airlock.Isolation
	}{
		{[]string{"--isolation", "vm"}, airlock.IsolationVM, airlock.IsolationVM},
		{[]string{"--isolation", "vm", "--first-party"}, airlock.IsolationVM, airlock.IsolationVM},
		{[]string{"--isolation=gvisor"}, airlock.IsolationKernel, airlock.IsolationKernel},
		{[]string{"--isolation", "default"}, "", airlock.IsolationContainer}, // still first-party
		{[]string{"--isolation", "container", "--first-party=false"}, airlock.IsolationContainer, airlock.IsolationKernel},
	} {
		args := append([]string{"set", "acme"}, tt.args...)
		out, errs, code := runCLI(t, runTenant, "", append(args, "--state-dir", dir)...)
		if code != 0 || !strings.Contains(out, "isolation floor "+string(tt.floor)) {
			t.Fatalf("%v: %d %q %q, want floor %s", tt.args, code, out, errs, tt.floor)
		}
		if got := stored(); got.Isolation != tt.set || got.IsolationFloor() != tt.floor {
			t.Errorf("%v: stored isolation %q floor %s, want %q floor %s", tt.args, got.Isolation, got.IsolationFloor(), tt.set, tt.floor)
		}
	}
	if _, _, code := runCLI(t, runTenant, "", "set", "acme", "--isolation", "vm", "--state-dir", dir); code != 0 {
		t.Fatal("set --isolation vm failed")
	}
	if out, _, code := runCLI(t, runTenant, "", "ls", "--state-dir", dir); code != 0 || !strings.Contains(out, "ISOLATION") || !strings.Contains(out, " vm ") {
		t.Errorf("ls does not show the floor vm: %q", out)
	}
	for _, bad := range []string{"microvm", "", "vm;rm"} {
		_, errs, code := runCLI(t, runTenant, "", "set", "acme", "--isolation", bad, "--state-dir", dir)
		if code != 2 || !strings.Contains(errs, "container, kernel (gvisor), vm or default") {
			t.Errorf("--isolation %q: exit %d %q, want 2 and the levels", bad, code, errs)
		}
	}
	if got := stored(); got.Isolation != airlock.IsolationVM {
		t.Errorf("a refused --isolation changed it to %q", got.Isolation)
	}
}
