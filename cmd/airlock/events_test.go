package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/store/sqlite"
)

// airlock events lists every tenant's abuse events (or one tenant's);
// airlock tenant quarantine and unquarantine set and lift a quarantine.
func TestEventsAndQuarantine(t *testing.T) {
	cliEnv(t)
	dir := filepath.Join(t.TempDir(), "state")
	for _, n := range []string{"acme", "other"} {
		if _, errs, code := runCLI(t, runTenant, "", "create", n, "--state-dir", dir); code != 0 {
			t.Fatalf("create: %d %s", code, errs)
		}
	}
	ctx := context.Background()
	db, err := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(dir, "airlock.db")})
	if err != nil {
		t.Fatal(err)
	}
	acme, _ := db.TenantByName(ctx, "acme")
	other, _ := db.TenantByName(ctx, "other")
	for _, ev := range []*airlock.AbuseEvent{
		{TenantID: acme.ID, SessionID: "sess1", Detector: airlock.DetectorMining, Evidence: map[string]any{"cpu_fraction": 0.98}, Action: airlock.ActionKilled},
		{TenantID: other.ID, ExecutionID: "exec1", Detector: airlock.DetectorScanning, Evidence: map[string]any{"distinct_destinations": 25}, Action: airlock.ActionQuarantined},
	} {
		if err := db.RecordAbuseEvent(ctx, ev); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()

	out, errs, code := runCLI(t, runEvents, "", "--state-dir", dir)
	if code != 0 || !strings.Contains(out, "acme") || !strings.Contains(out, "cpu_fraction=0.98") ||
		!strings.Contains(out, "other") || !strings.Contains(out, "distinct_destinations=25") || !strings.Contains(out, "exec1") {
		t.Fatalf("events: %d %q %q", code, out, errs)
	}
	if strings.Index(out, "scanning") > strings.Index(out, "mining") {
		t.Errorf("not newest first: %q", out)
	}
	out, _, code = runCLI(t, runEvents, "", "--tenant", "acme", "--json", "--state-dir", dir)
	if code != 0 || strings.Count(out, "\n") != 1 || !strings.Contains(out, `"detector":"mining"`) || !strings.Contains(out, `"tenant":"acme"`) {
		t.Errorf("events --tenant acme --json: %q", out)
	}
	if _, errs, code := runCLI(t, runEvents, "", "--tenant", "nobody", "--state-dir", dir); code != 1 || !strings.Contains(errs, "no such tenant") {
		t.Errorf("events --tenant nobody: %d %q", code, errs)
	}
	if _, _, code := runCLI(t, runEvents, "", "--limit", "0", "--state-dir", dir); code != 2 {
		t.Errorf("--limit 0: exit %d", code)
	}

	quarantined := func() bool {
		t.Helper()
		db, err := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(dir, "airlock.db")})
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		q, err := db.TenantQuarantine(ctx, acme.ID)
		if err != nil {
			t.Fatal(err)
		}
		return q != nil
	}
	if out, errs, code := runCLI(t, runTenant, "", "quarantine", "acme", "--reason", "test", "--state-dir", dir); code != 0 || !strings.Contains(out, "quarantined") {
		t.Fatalf("quarantine: %d %q %q", code, out, errs)
	}
	if !quarantined() {
		t.Fatal("not quarantined in the store")
	}
	// tenant ls says so, with the guard policy beside it.
	if out, _, code := runCLI(t, runTenant, "", "ls", "--state-dir", dir); code != 0 || !lsRow(out, "acme", "warn", "since ") {
		t.Errorf("tenant ls of a quarantined tenant: %d %q", code, out)
	}
	if out, errs, code := runCLI(t, runTenant, "", "unquarantine", "acme", "--state-dir", dir); code != 0 || !strings.Contains(out, "no longer quarantined") || !strings.Contains(out, "test") {
		t.Fatalf("unquarantine: %d %q %q", code, out, errs)
	}
	if quarantined() {
		t.Fatal("still quarantined")
	}
	if out, _, code := runCLI(t, runTenant, "", "ls", "--state-dir", dir); code != 0 || !lsRow(out, "acme", "warn", "no") {
		t.Errorf("tenant ls after the quarantine was lifted: %d %q", code, out)
	}
	if out, _, code := runCLI(t, runTenant, "", "unquarantine", "acme", "--state-dir", dir); code != 0 || !strings.Contains(out, "was not quarantined") {
		t.Errorf("unquarantine again: %d %q", code, out)
	}
	if _, errs, code := runCLI(t, runTenant, "", "unquarantine", "nobody", "--state-dir", dir); code != 1 || !strings.Contains(errs, "no such tenant") {
		t.Errorf("unquarantine nobody: %d %q", code, errs)
	}
}

// lsRow reports whether the tenant ls output has a row for name whose
// fields hold each of want, in order.
func lsRow(out, name string, want ...string) bool {
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || f[1] != name {
			continue
		}
		rest := strings.Join(f[2:], " ")
		for _, w := range want {
			i := strings.Index(rest, w)
			if i < 0 {
				return false
			}
			rest = rest[i+len(w):]
		}
		return true
	}
	return false
}

// A tenant with no abuse events gets [] in JSON, never null: scripts iterate
// over it.
func TestClientEventsEmptyIsList(t *testing.T) {
	cliEnv(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/events" || r.Header.Get("Authorization") != "Bearer alk_t" {
			http.Error(w, "unexpected", http.StatusTeapot)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"events":null}`))
	}))
	t.Cleanup(srv.Close)
	out, errs, code := runCLI(t, runClientEvents, "", "--url", srv.URL, "--key", "alk_t", "--all", "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var got map[string]json.RawMessage
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("output %q: %v", out, err)
	}
	if string(got["events"]) != "[]" {
		t.Errorf("events = %s, want []", got["events"])
	}
}
