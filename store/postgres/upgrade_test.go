package postgres_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/testpg"
)

// A database made before the two stores were one (schema at version 15,
// testdata/v15 holds that binary's migrations) opens with this store: no
// migration runs again, the records read back, writes that need the
// later CHECK constraints work, and the schema is the one a new database
// gets.
func TestOpenDatabaseOfVersion15(t *testing.T) {
	ctx := context.Background()
	dsn := testpg.NewDatabase(t)
	raw := rawConn(t, dsn)
	exec := func(q string, args ...any) {
		t.Helper()
		if _, err := raw.Exec(ctx, q, args...); err != nil {
			t.Fatalf("%.60s: %v", q, err)
		}
	}
	exec(`CREATE TABLE schema_migrations (
		version    INTEGER PRIMARY KEY,
		name       TEXT    NOT NULL,
		applied_at BIGINT  NOT NULL
	)`)
	files, _ := filepath.Glob("testdata/v15/*.sql")
	if len(files) != 15 {
		t.Fatalf("testdata/v15 has %d migrations, want 15", len(files))
	}
	for i, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		exec(string(b))
		exec(`INSERT INTO schema_migrations VALUES ($1, $2, 42)`, i+1, filepath.Base(f))
	}
	exec(`INSERT INTO tenants (id, name, first_party, created_at) VALUES ('t1', 'acme', true, 5)`)
	exec(`INSERT INTO executions (exec_id, tenant_id, language, status, created_at, phases, timed_out)
		VALUES ('e1', 't1', 'python', 'completed', 6, '{"boot":1.5}', true)`)

	db := openDSN(t, dsn, time.Now)
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

	var n, stamped int
	if err := raw.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE applied_at = 42) FROM schema_migrations`).Scan(&n, &stamped); err != nil {
		t.Fatal(err)
	}
	if n != 19 || stamped != 15 { // 0016-0019 (keys, audit log, broker grants, templates) run on top
		t.Errorf("schema_migrations: %d rows, %d of the old binary; want 19 and 15: a migration ran again, or a new one did not", n, stamped)
	}
	fresh := testpg.NewDatabase(t)
	openDSN(t, fresh, time.Now).Close()
	if old, now := pgSchema(t, raw), pgSchema(t, rawConn(t, fresh)); len(old) < 100 || !slices.Equal(old, now) {
		t.Errorf("the schema of a database of version 15 and of a new one differ:\nold %q\nnew %q", old, now)
	}
}

// pgSchema lists the columns, constraints and indexes of the public
// schema.
func pgSchema(t *testing.T, c *pgx.Conn) []string {
	t.Helper()
	rows, err := c.Query(context.Background(), `
		SELECT table_name || '.' || column_name || ' ' || data_type || ' ' || is_nullable || ' ' || coalesce(column_default, '') || ' ' || is_identity
			FROM information_schema.columns WHERE table_schema = 'public'
		UNION ALL
		SELECT conrelid::regclass::text || ' ' || conname || ' ' || pg_get_constraintdef(oid)
			FROM pg_constraint WHERE connamespace = 'public'::regnamespace
		UNION ALL
		SELECT indexdef FROM pg_indexes WHERE schemaname = 'public'
		ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return out
}
