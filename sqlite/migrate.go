package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// migration is one numbered file of migrations/, e.g. 0001_init.sql.
type migration struct {
	version int
	name    string
	sql     string
}

// loadMigrations reads the embedded migrations in version order.
func loadMigrations() ([]migration, error) {
	names, err := fs.Glob(migrationFS, "migrations/*.sql")
	if err != nil {
		return nil, err
	}
	var ms []migration
	seen := map[int]string{}
	for _, name := range names {
		base := path.Base(name)
		num, _, ok := strings.Cut(base, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v <= 0 {
			return nil, fmt.Errorf("sqlite: migration %s: name must be NNNN_description.sql", base)
		}
		if other, dup := seen[v]; dup {
			return nil, fmt.Errorf("sqlite: migrations %s and %s share version %d", other, base, v)
		}
		seen[v] = base
		b, err := migrationFS.ReadFile(name)
		if err != nil {
			return nil, err
		}
		ms = append(ms, migration{version: v, name: base, sql: string(b)})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].version < ms[j].version })
	return ms, nil
}

// migrate applies every migration not yet recorded in schema_migrations,
// each in its own transaction with its record, so a crash leaves the schema
// at a whole version. Re-running it is a no-op.
func (db *DB) migrate(ctx context.Context) error {
	ms, err := loadMigrations()
	if err != nil {
		return err
	}
	if _, err := db.write.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    INTEGER PRIMARY KEY,
		name       TEXT    NOT NULL,
		applied_at INTEGER NOT NULL
	)`); err != nil {
		return wrap("migrate", err)
	}
	var newest sql.NullInt64
	if err := db.write.QueryRowContext(ctx, `SELECT max(version) FROM schema_migrations`).Scan(&newest); err != nil {
		return wrap("migrate", err)
	}
	if len(ms) > 0 && newest.Int64 > int64(ms[len(ms)-1].version) {
		return fmt.Errorf("sqlite: database schema version %d is newer than this binary's %d",
			newest.Int64, ms[len(ms)-1].version)
	}
	for _, m := range ms {
		err := db.inWriteTx(ctx, func(tx *sql.Tx) error {
			var n int
			if err := tx.QueryRowContext(ctx,
				`SELECT count(*) FROM schema_migrations WHERE version = ?`, m.version).Scan(&n); err != nil {
				return err
			}
			if n > 0 {
				return nil
			}
			if _, err := tx.ExecContext(ctx, m.sql); err != nil {
				return err
			}
			_, err := tx.ExecContext(ctx,
				`INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)`,
				m.version, m.name, nanos(db.now()))
			return err
		})
		if err != nil {
			return wrap("migration "+m.name, err)
		}
	}
	return nil
}
