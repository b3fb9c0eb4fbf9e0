package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"net/http/httptest"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/api/rest"
	"github.com/airlockhq/airlock/blob/disk"
	"github.com/airlockhq/airlock/store/sqlite"
)

type noExecutor struct{}

func (noExecutor) Execute(context.Context, *airlock.Tenant, string, airlock.ExecuteRequest) (*airlock.Execution, error) {
	return nil, airlock.Errorf(airlock.ENOTIMPLEMENTED, "no runs here")
}

// adminServer is a real REST API with the admin API on a SQLite store,
// and an operator key.
func adminServer(t *testing.T) (string, string, *sqlite.DB) {
	t.Helper()
	ctx := context.Background()
	db, err := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(t.TempDir(), "airlock.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	blobs, err := disk.New(disk.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	s, err := rest.New(rest.Config{Store: db, Blobs: blobs, Executor: noExecutor{}, SigningKey: make([]byte, 32),
		Admin: db, Audit: db, QuotaNames: quotaNamesForTest()})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	secret, k := airlock.NewAPIKey("", "", time.Now())
	k.Role, k.Name = airlock.RoleAdmin, "ops"
	if err := db.CreateAPIKey(ctx, k); err != nil {
		t.Fatal(err)
	}
	return srv.URL, secret, db
}

func quotaNamesForTest() []string {
	return []string{"sessions", "runs", "executions_per_minute", "vcpu", "memory", "sandbox_seconds_per_day", "egress_bytes_per_day"}
}

func TestAdminCLI(t *testing.T) {
	cliEnv(t)
	t.Setenv(envStateDir, t.TempDir()) // no admin.key there
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	url, admin, db := adminServer(t)
	flags := []string{"--url", url, "--admin-key", admin}
	run := func(args ...string) (string, string, int) {
		t.Helper()
		return runCLI(t, runAdmin, "", append(args, flags...)...)
	}
	if out, errs, code := run("tenant", "create", "acme"); code != 0 || !strings.Contains(out, "created tenant acme") {
		t.Fatalf("tenant create: %d %q %q", code, out, errs)
	}
	if _, errs, code := run("tenant", "create", "acme"); code != 1 || !strings.Contains(errs, "409 tenant-exists") {
		t.Errorf("tenant create again: %d %q", code, errs)
	}
	out, errs, code := run("tenant", "set", "acme", "-o", "json", "--broker-scope", "tickets.read", "--quota", "vcpu=2", "--quota", "sessions=unlimited", "--isolation", "vm")
	if code != 0 || !strings.Contains(out, `"tickets.read"`) || !strings.Contains(out, `"vcpu": 2000`) || !strings.Contains(out, `"sessions": -1`) {
		t.Fatalf("tenant set: %d %q %q", code, out, errs)
	}
	acme, err := db.TenantByName(context.Background(), "acme")
	if err != nil {
		t.Fatal(err)
	}
	if g, _ := db.BrokerGrants(context.Background(), acme.ID); len(g) != 1 || g[0] != "tickets.read" {
		t.Errorf("grants in the store: %v", g)
	}
	if out, _, code := run("tenant", "ls"); code != 0 || !strings.Contains(out, "acme") || !strings.Contains(out, "tickets.read") {
		t.Errorf("tenant ls: %d %q", code, out)
	}
	out, errs, code = run("key", "create", "acme", "--name", "ci", "--expires", "24h")
	secret := strings.TrimSpace(out)
	if code != 0 || !strings.HasPrefix(secret, airlock.APIKeyPrefix) || !strings.Contains(errs, "shown this once") {
		t.Fatalf("key create: %d %q %q", code, out, errs)
	}
	k, err := db.APIKeyByHash(context.Background(), airlock.HashAPIKey(secret))
	if err != nil || k.Name != "ci" || k.ExpiresAt == nil || k.TenantID != acme.ID {
		t.Fatalf("the key in the store: %+v, %v", k, err)
	}
	if out, _, code := run("key", "ls", "acme"); code != 0 || !strings.Contains(out, k.ID) || strings.Contains(out, secret) {
		t.Errorf("key ls: %d %q", code, out)
	}
	if out, _, code := run("key", "revoke", k.ID); code != 0 || !strings.Contains(out, "revoked") {
		t.Errorf("key revoke: %d %q", code, out)
	}
	if k, _ := db.APIKey(context.Background(), k.ID); k.RevokedAt == nil {
		t.Error("the key is not revoked in the store")
	}
	if out, _, code := run("audit", "-o", "json", "--action", "key.revoke"); code != 0 || !strings.Contains(out, `"key_name": "ops"`) || !strings.Contains(out, k.ID) {
		t.Errorf("audit: %d %q", code, out)
	}
	if out, _, code := run("tenant", "rm", "acme"); code != 0 || !strings.Contains(out, "deleted") {
		t.Errorf("tenant rm: %d %q", code, out)
	}

	// The key from the environment, then from a profile; a tenant's key is refused.
	t.Setenv(envAdminKey, admin)
	t.Setenv(envURL, url)
	if out, errs, code := runCLI(t, runAdmin, "", "tenant", "ls"); code != 0 || !strings.Contains(out, "NAME") {
		t.Errorf("from the environment: %d %q %q", code, out, errs)
	}
	t.Setenv(envAdminKey, "")
	t.Setenv(envURL, "")
	prof := filepath.Join(t.TempDir(), "profile.json")
	if err := os.WriteFile(prof, []byte(`{"url":"`+url+`","admin_key":"`+admin+`"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, errs, code := runCLI(t, runAdmin, "", "tenant", "ls", "--profile", prof); code != 0 || !strings.Contains(out, "NAME") {
		t.Errorf("from a profile: %d %q %q", code, out, errs)
	}
	tn := &airlock.Tenant{Name: "beta"}
	db.CreateTenant(context.Background(), tn)
	tsecret, tk := airlock.NewAPIKey(tn.ID, "", time.Now())
	db.CreateAPIKey(context.Background(), tk)
	if _, errs, code := runCLI(t, runAdmin, "", "tenant", "ls", "--url", url, "--admin-key", tsecret); code != 1 || !strings.Contains(errs, "403 admin-role-required") {
		t.Errorf("a tenant's key: %d %q", code, errs)
	}
	if _, errs, code := runCLI(t, runAdmin, "", "tenant", "ls", "--url", url); code != 1 || !strings.Contains(errs, "no operator key") {
		t.Errorf("no key: %d %q", code, errs)
	}
}
