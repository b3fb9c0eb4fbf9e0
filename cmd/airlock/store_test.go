package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/testpg"
	"github.com/airlockhq/airlock/store/postgres"
)

func TestMain(m *testing.M) { os.Exit(testpg.Main(m)) }

// With $AIRLOCK_STORE naming a PostgreSQL database, the operator's
// commands work on it and make no SQLite file: a tenant made and keyed
// there resolves in the database, and its settings read back.
func TestCommandsOnPostgres(t *testing.T) {
	cliEnv(t)
	url := testpg.NewDatabaseURL(t) // a URL, as airlockd's --store takes
	db, err := postgres.Open(context.Background(), postgres.Config{DSN: url, Now: time.Now})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	t.Setenv(envStore, url)
	dir := filepath.Join(t.TempDir(), "state")
	t.Setenv(envStateDir, dir)

	if out, errs, code := runCLI(t, runTenant, "", "create", "acme"); code != 0 || !strings.HasPrefix(out, "created tenant acme (") {
		t.Fatalf("create: exit %d %q %q", code, out, errs)
	}
	out, errs, code := runCLI(t, runKey, "", "create", "acme")
	secret := strings.TrimSuffix(out, "\n")
	if code != 0 || !strings.HasPrefix(secret, airlock.APIKeyPrefix) {
		t.Fatalf("key create: exit %d %q %q", code, out, errs)
	}
	if tn, err := db.TenantByKeyHash(context.Background(), airlock.HashAPIKey(secret)); err != nil || tn.Name != "acme" {
		t.Errorf("the key in PostgreSQL: %+v %v", tn, err)
	}
	if out, _, code := runCLI(t, runTenant, "", "ls"); code != 0 || !strings.Contains(out, " acme ") {
		t.Errorf("ls: exit %d\n%s", code, out)
	}
	if _, err := os.Stat(filepath.Join(dir, databaseFile)); !os.IsNotExist(err) {
		t.Errorf("a SQLite file was made: %v", err)
	}

	t.Setenv(envStore, "postgres://nobody@/nowhere?host=/nonexistent-dir&connect_timeout=1")
	if _, errs, code := runCLI(t, runTenant, "", "ls"); code != 1 || !strings.Contains(errs, envStore) {
		t.Errorf("ls on a database that cannot be reached: exit %d %q", code, errs)
	}
}
