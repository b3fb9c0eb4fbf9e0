package sqlite_test

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/store/migrations"
	"github.com/airlockhq/airlock/store/sqlite"
)

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		cfg  sqlite.Config
		ok   bool
	}{
		{"file", sqlite.Config{Path: "/var/lib/airlock/airlock.db"}, true},
		{"relative", sqlite.Config{Path: "airlock.db"}, true},
		{"empty", sqlite.Config{}, false},
		{"memory", sqlite.Config{Path: ":memory:"}, false},
		{"uri", sqlite.Config{Path: "file:airlock.db?mode=rwc"}, false},
		{"query", sqlite.Config{Path: "/tmp/a.db?_pragma=foo"}, false},
		{"negative busy timeout", sqlite.Config{Path: "a.db", BusyTimeout: -time.Second}, false},
		{"negative readers", sqlite.Config{Path: "a.db", MaxReaders: -1}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			if (err == nil) != tt.ok {
				t.Fatalf("Validate() = %v, want ok=%v", err, tt.ok)
			}
			if err != nil {
				wantCode(t, "Validate", err, airlock.EINVALID)
			}
		})
	}
}

// rawDB opens the store's file directly, to look at what the store wrote.
func rawDB(t *testing.T, path string) *sql.DB {
	t.Helper()
	raw, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { raw.Close() })
	return raw
}

func TestOpenMigrationsIdempotent(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "sub", "airlock.db")
	c := newClock()

	db, err := sqlite.Open(ctx, sqlite.Config{Path: path, Now: c.Now})
	if err != nil {
		t.Fatal(err)
	}
	tn := mustTenant(t, db, "acme")
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		db, err := sqlite.Open(ctx, sqlite.Config{Path: path, Now: c.Now})
		if err != nil {
			t.Fatalf("reopen %d: %v", i, err)
		}
		got, err := db.TenantByName(ctx, "acme")
		if err != nil || got.ID != tn.ID {
			t.Fatalf("reopen %d: TenantByName = %+v, %v; want ID %s", i, got, err, tn.ID)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	}

	raw := rawDB(t, path)
	var applied int
	if err := raw.QueryRow(`SELECT count(*) FROM schema_migrations`).Scan(&applied); err != nil {
		t.Fatal(err)
	}
	ms, err := migrations.For("sqlite")
	if err != nil {
		t.Fatal(err)
	}
	if applied != len(ms) || applied == 0 {
		t.Errorf("schema_migrations has %d rows, want %d", applied, len(ms))
	}
	var mode string
	if err := raw.QueryRow(`PRAGMA journal_mode`).Scan(&mode); err != nil || mode != "wal" {
		t.Errorf("journal_mode = %q, %v; want wal", mode, err)
	}
	for _, p := range []string{path, filepath.Dir(path)} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		want := os.FileMode(0o600)
		if fi.IsDir() {
			want = 0o700
		}
		if fi.Mode().Perm() != want {
			t.Errorf("%s: mode %v, want %v", p, fi.Mode().Perm(), want)
		}
	}
}

func TestOpenRefusesNewerSchema(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "airlock.db")
	db, err := sqlite.Open(ctx, sqlite.Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	raw := rawDB(t, path)
	if _, err := raw.Exec(`INSERT INTO schema_migrations (version, name, applied_at) VALUES (9999, 'future.sql', 0)`); err != nil {
		t.Fatal(err)
	}
	if db, err := sqlite.Open(ctx, sqlite.Config{Path: path}); err == nil {
		db.Close()
		t.Fatal("Open succeeded on a database from a newer binary")
	}
}

// TestReadsDoNotWaitForWriter holds the write lock from another connection
// (as a long write would) and checks that reads still answer at once.
func TestReadsDoNotWaitForWriter(t *testing.T) {
	path := filepath.Join(t.TempDir(), "airlock.db")
	db := openAt(t, path, newClock().Now)
	tn := mustTenant(t, db, "acme")
	e := mustExecution(t, db, tn.ID)

	ctx := context.Background()
	raw := rawDB(t, path)
	conn, err := raw.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, `BEGIN IMMEDIATE`); err != nil {
		t.Fatal(err)
	}
	defer conn.ExecContext(ctx, `ROLLBACK`)
	if _, err := conn.ExecContext(ctx, `INSERT INTO tenants (id, name, first_party, created_at) VALUES ('x', 'held', 0, 0)`); err != nil {
		t.Fatal(err)
	}

	rctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if _, err := db.TenantByName(rctx, "acme"); err != nil {
		t.Errorf("TenantByName while a write is open: %v", err)
	}
	if _, err := db.Execution(rctx, tn.ID, e.ID); err != nil {
		t.Errorf("Execution while a write is open: %v", err)
	}
	if _, err := db.ListExecutions(rctx, airlock.ExecutionFilter{TenantID: tn.ID, Before: e.ID}); err != nil {
		t.Errorf("ListExecutions while a write is open: %v", err)
	}
	if _, err := db.TenantByName(rctx, "held"); airlock.ErrorCode(err) != airlock.ENOTFOUND {
		t.Errorf("uncommitted tenant visible: %v", err)
	}
}
