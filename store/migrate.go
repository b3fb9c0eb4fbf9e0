package store

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/airlockhq/airlock/store/migrations"
)

// migrate applies every migration of the dialect not yet recorded in
// schema_migrations, each in its own transaction with its record, so a
// crash leaves the schema at a whole version. It runs on one connection
// of on, holding the dialect's migration lock throughout, so processes
// starting at once migrate one after the other (the later ones find
// nothing to do). A database whose schema is newer than the binary is
// refused. Re-running it is a no-op.
func (db *DB) migrate(ctx context.Context, on *sql.DB) error {
	ms, err := migrations.For(db.d.Name())
	if err != nil {
		return err
	}
	conn, err := on.Conn(ctx)
	if err != nil {
		return db.wrap(ctx, "migrate", err)
	}
	defer conn.Close()
	unlock, err := db.d.LockMigrations(ctx, conn)
	if err != nil {
		return db.wrap(ctx, "migrate: take the migration lock", err)
	}
	if _, err := conn.ExecContext(ctx, fmt.Sprintf(`CREATE TABLE IF NOT EXISTS schema_migrations (
		version    INTEGER PRIMARY KEY,
		name       TEXT    NOT NULL,
		applied_at %s  NOT NULL
	)`, migrations.Words[db.d.Name()]["int"])); err != nil {
		return db.wrap(ctx, "migrate", err)
	}
	var newest *int64
	if err := conn.QueryRowContext(ctx, `SELECT max(version) FROM schema_migrations`).Scan(&newest); err != nil {
		return db.wrap(ctx, "migrate", err)
	}
	if len(ms) > 0 && newest != nil && *newest > int64(ms[len(ms)-1].Version) {
		return fmt.Errorf("%s: database schema version %d is newer than this binary's %d",
			db.d.Name(), *newest, ms[len(ms)-1].Version)
	}
	for _, m := range ms {
		err := func() error {
			tx, err := conn.BeginTx(ctx, nil)
			if err != nil {
				return err
			}
			defer tx.Rollback()
			var n int
			if err := tx.QueryRowContext(ctx,
				`SELECT count(*) FROM schema_migrations WHERE version = $1`, m.Version).Scan(&n); err != nil {
				return err
			}
			if n > 0 {
				return nil
			}
			// No arguments: every statement of the file runs (PostgreSQL's
			// simple protocol; SQLite's driver runs them one by one).
			if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx,
				`INSERT INTO schema_migrations (version, name, applied_at) VALUES ($1, $2, $3)`,
				m.Version, m.Name, nanos(db.now())); err != nil {
				return err
			}
			return tx.Commit()
		}()
		if err != nil {
			return db.wrap(ctx, "migration "+m.Name, err)
		}
	}
	if err := unlock(ctx); err != nil {
		return db.wrap(ctx, "migrate: release the migration lock", err)
	}
	return nil
}
