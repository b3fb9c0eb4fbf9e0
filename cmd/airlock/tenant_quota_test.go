package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/service/quota"
	"github.com/airlockhq/airlock/store/sqlite"
)

func TestTenantQuotas(t *testing.T) {
	cliEnv(t)
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "state")
	for _, name := range []string{"acme", "globex"} {
		if _, errs, code := runCLI(t, runTenant, "", "create", name, "--state-dir", dir); code != 0 {
			t.Fatalf("create: %d %s", code, errs)
		}
	}
	out, errs, code := runCLI(t, runTenant, "", "set", "acme", "--quota", "sessions=2", "--quota", "vcpu=1.5", "--quota", "egress_bytes_per_day=1GiB", "--state-dir", dir)
	if code != 0 || !strings.Contains(out, "quota sessions=2") || !strings.Contains(out, "quota vcpu=1.5") {
		t.Fatalf("set --quota: %d %q %q", code, out, errs)
	}
	if out, _, code := runCLI(t, runTenant, "", "ls", "--state-dir", dir); code != 0 || !strings.Contains(out, "sessions=2 vcpu=1.5 egress_bytes_per_day=1GiB") {
		t.Errorf("ls: %q", out)
	}
	if out, errs, code := runCLI(t, runTenant, "", "set", "acme", "--quota", "vcpu=default", "--state-dir", dir); code != 0 || !strings.Contains(out, "vcpu is the default again") {
		t.Fatalf("drop: %d %q %q", code, out, errs)
	}
	for _, tt := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"set", "acme", "--quota", "nonsense=1"}, 2, "unknown quota"},
		{[]string{"set", "acme", "--quota", "nonsense=default"}, 2, "unknown quota"},
		{[]string{"set", "acme", "--quota", "sessions=-3"}, 2, "not a count"},
		{[]string{"set", "acme", "--quota", "sessions"}, 2, "KEY=VALUE"},
		{[]string{"set", "nobody", "--quota", "sessions=1"}, 1, "no such tenant"},
		{[]string{"usage", "nobody"}, 1, "no such tenant"},
		{[]string{"usage", "a", "b"}, 2, "at most one"},
	} {
		_, errs, code := runCLI(t, runTenant, "", append(tt.args, "--state-dir", dir)...)
		if code != tt.code || !strings.Contains(errs, tt.msg) {
			t.Errorf("%v: exit %d %q, want %d %q", tt.args, code, errs, tt.code, tt.msg)
		}
	}

	// What the store has: a live session, a running run, today's counts.
	db, err := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(dir, "airlock.db")})
	if err != nil {
		t.Fatal(err)
	}
	acme, _ := db.TenantByName(ctx, "acme")
	now := time.Now().UTC()
	s := &airlock.Session{ID: "s1", TenantID: acme.ID, Image: "base", Size: airlock.SizeSmall, State: airlock.SessionCreating,
		Limits: airlock.SessionLimits{CPUs: 1, MemoryBytes: 1 << 30}, CreatedAt: now, ExpiresAt: now.Add(time.Hour), LastActiveAt: now}
	if err := db.CreateSession(ctx, s); err != nil {
		t.Fatal(err)
	}
	if err := db.CreateExecution(ctx, &airlock.Execution{TenantID: acme.ID, Language: airlock.Bash}); err != nil {
		t.Fatal(err)
	}
	if err := db.AddUsage(ctx, []airlock.UsageDelta{{TenantID: acme.ID, Day: quota.Day(now), DailyUsage: airlock.DailyUsage{SandboxMillis: 90500, EgressBytes: 2 << 20}}}); err != nil {
		t.Fatal(err)
	}
	db.Close()

	// Without airlockd's defaults file, limits not overridden are unknown.
	out, errs, code = runCLI(t, runTenant, "", "usage", "--state-dir", dir)
	if code != 0 || !strings.Contains(out, "1/2*") || !strings.Contains(out, "1GiB/?") || !strings.Contains(out, "has not written its defaults") {
		t.Fatalf("usage: %d %q %q", code, out, errs)
	}
	if err := quota.WriteDefaults(filepath.Join(dir, quota.DefaultsFile), quota.Limits{quota.Sessions: 8, quota.Memory: 4 << 30}); err != nil {
		t.Fatal(err)
	}
	out, _, code = runCLI(t, runTenant, "", "usage", "acme", "--json", "--state-dir", dir)
	var rows []usageRow
	if err := json.Unmarshal([]byte(out), &rows); code != 0 || err != nil || len(rows) != 1 {
		t.Fatalf("usage --json: %d %q %v", code, out, err)
	}
	want := map[string][3]int64{ // used, limit, remaining
		"sessions": {1, 2, 1}, "runs": {1, -1, -1}, "executions_per_minute": {1, -1, -1}, "vcpu": {1000, -1, -1},
		"memory": {1 << 30, 4 << 30, 3 << 30}, "sandbox_seconds_per_day": {90, -1, -1}, "egress_bytes_per_day": {2 << 20, 1 << 30, 1<<30 - 2<<20},
		"volume_bytes": {0, -1, -1},
	}
	for _, q := range rows[0].Quotas {
		if w := want[q.Quota]; [3]int64{q.Used, q.Limit, q.Remaining} != w {
			t.Errorf("%s: used %d limit %d remaining %d, want %v", q.Quota, q.Used, q.Limit, q.Remaining, w)
		}
	}
	if out, _, _ := runCLI(t, runTenant, "", "usage", "--state-dir", dir); !strings.Contains(out, "globex") || !strings.Contains(out, "0/8") {
		t.Errorf("usage of all: %q", out)
	}
}
