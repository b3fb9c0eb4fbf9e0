package sqlite_test

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/airlockhq/airlock"
)

// A state directory made before the two stores were one (schema at
// version 15, testdata/v15 holds that binary's migrations) opens with
// this store: no migration runs again, the records read back, writes
// that need the later CHECK constraints work, and the schema is the one
// a new database gets.
func TestOpenDatabaseOfVersion15(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "airlock.db")
	raw := rawDB(t, path)
	if _, err := raw.Exec(`PRAGMA journal_mode = WAL`); err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Exec(`CREATE TABLE schema_migrations (
		version    INTEGER PRIMARY KEY,
		name       TEXT    NOT NULL,
		applied_at INTEGER NOT NULL
	)`); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob("testdata/v15/*.sql")
	if len(files) != 15 {
		t.Fatalf("testdata/v15 has %d migrations, want 15", len(files))
	}
	for i, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := raw.Exec(string(b)); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if _, err := raw.Exec(`INSERT INTO schema_migrations VALUES (?, ?, ?)`, i+1, filepath.Base(f), 42); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := raw.Exec(`INSERT INTO tenants (id, name, first_party, created_at) VALUES ('t1', 'acme', 1, 5)`); err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Exec(`INSERT INTO executions (exec_id, tenant_id, language, status, created_at, phases, timed_out)
		VALUES ('e1', 't1', 'python', 'completed', 6, '{"boot":1.5}', 1)`); err != nil {
		t.Fatal(err)
	}
	raw.Close()

	db := openAt(t, path, newClock().Now)
	tn, err := db.TenantByName(ctx, "acme")
	if err != nil || tn.ID != "t1" || !tn.FirstParty {
		t.Fatalf("TenantByName = %+v, %v", tn, err)
	}
	e, err := db.Execution(ctx, "t1", "e1")
	if err != nil || !e.TimedOut || e.Phases["boot"] != 1.5 {
		t.Fatalf("Execution = %+v, %v", e, err)
	}
	if err := db.RecordPhase(ctx, "t1", "e1", "run", 2); err != nil {
		t.Fatal(err)
	}
	s := &airlock.Session{TenantID: "t1", Image: "python", Size: "small"}
	if err := db.CreateSession(ctx, s); err != nil {
		t.Fatal(err)
	}
	s.State = airlock.SessionPaused
	if err := db.UpdateSession(ctx, s); err != nil {
		t.Fatalf("pause a session (0012's CHECK): %v", err)
	}
	db.Close()

	raw = rawDB(t, path)
	var n, stamped int
	if err := raw.QueryRow(`SELECT count(*), sum(applied_at = 42) FROM schema_migrations`).Scan(&n, &stamped); err != nil {
		t.Fatal(err)
	}
	if n != 19 || stamped != 15 { // 0016-0019 (keys, audit log, broker grants, volumes) run on top
		t.Errorf("schema_migrations: %d rows, %d of the old binary; want 19 and 15: a migration ran again, or a new one did not", n, stamped)
	}
	fresh := filepath.Join(t.TempDir(), "fresh.db")
	openAt(t, fresh, newClock().Now).Close()
	if old, now := schema(t, path), schema(t, fresh); len(old) < 20 || !slices.Equal(old, now) {
		t.Errorf("the schema of a database of version 15 and of a new one differ:\nold %q\nnew %q", old, now)
	}
}

// schema lists the database's tables and indexes as SQLite keeps them,
// without comments and with white space folded.
func schema(t *testing.T, path string) []string {
	t.Helper()
	raw := rawDB(t, path)
	rows, err := raw.Query(`SELECT type, name, coalesce(sql, '') FROM sqlite_schema ORDER BY type, name`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	comment, space := regexp.MustCompile(`--[^\n]*`), regexp.MustCompile(`\s+`)
	var out []string
	for rows.Next() {
		var typ, name, sql string
		if err := rows.Scan(&typ, &name, &sql); err != nil {
			t.Fatal(err)
		}
		sql = space.ReplaceAllString(comment.ReplaceAllString(sql, ""), " ")
		sql = strings.NewReplacer("( ", "(", " )", ")", " ,", ",").Replace(sql)
		out = append(out, typ+" "+name+": "+sql)
	}
	return out
}
