package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"fmt"

	"github.com/airlockhq/airlock/store/migrations"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// migrate applies every migration not yet recorded in schema_migrations,
// each in its own transaction with its record, so a crash leaves the schema
// at a whole version. Re-running it is a no-op.
func (db *DB) migrate(ctx context.Context) error {
	ms, err := migrations.Load(migrationFS, "migrations/*.sql", "sqlite")
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
	if len(ms) > 0 && newest.Int64 > int64(ms[len(ms)-1].Version) {
		return fmt.Errorf("sqlite: database schema version %d is newer than this binary's %d",
			newest.Int64, ms[len(ms)-1].Version)
	}
	for _, m := range ms {
		err := db.inWriteTx(ctx, func(tx *sql.Tx) error {
			var n int
			if err := tx.QueryRowContext(ctx,
				`SELECT count(*) FROM schema_migrations WHERE version = ?`, m.Version).Scan(&n); err != nil {
				return err
			}
			if n > 0 {
				return nil
			}
			if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
				return err
			}
			_, err := tx.ExecContext(ctx,
				`INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)`,
				m.Version, m.Name, nanos(db.now()))
			return err
		})
		if err != nil {
			return wrap("migration "+m.Name, err)
		}
	}
	return nil
}
