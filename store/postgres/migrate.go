package postgres

import (
	"context"
	"embed"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/airlockhq/airlock/store/migrations"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// migrateLock is the key of the advisory lock held while migrating, the
// same on every node ("airlock" "migr" in ASCII).
const migrateLock int64 = 0x61_69_72_6c_6d_69_67_72

// migrate applies every migration not yet recorded in schema_migrations,
// each in its own transaction with its record, so a crash leaves the
// schema at a whole version. It holds a session-level advisory lock on
// one connection throughout, so nodes starting at once migrate one after
// the other (the later ones find nothing to do); that connection is
// closed after, which releases the lock even if unlocking failed.
// Re-running it is a no-op.
func (db *DB) migrate(ctx context.Context) error {
	ms, err := migrations.Load(migrationFS, "migrations/*.sql", "postgres")
	if err != nil {
		return err
	}
	pc, err := db.pool.Acquire(ctx)
	if err != nil {
		return wrap(ctx, "migrate", err)
	}
	conn := pc.Hijack()
	defer conn.Close(context.WithoutCancel(ctx))
	// Migrating waits as long as it must (for another node's migration,
	// for the locks of nodes serving): the caller's context bounds it.
	if _, err := conn.Exec(ctx, `SET lock_timeout = 0`); err != nil {
		return wrap(ctx, "migrate", err)
	}
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1)`, migrateLock); err != nil {
		return wrap(ctx, "migrate: take the migration lock", err)
	}
	if _, err := conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    INTEGER PRIMARY KEY,
		name       TEXT    NOT NULL,
		applied_at BIGINT  NOT NULL
	)`); err != nil {
		return wrap(ctx, "migrate", err)
	}
	var newest *int64
	if err := conn.QueryRow(ctx, `SELECT max(version) FROM schema_migrations`).Scan(&newest); err != nil {
		return wrap(ctx, "migrate", err)
	}
	if len(ms) > 0 && newest != nil && *newest > int64(ms[len(ms)-1].Version) {
		return fmt.Errorf("postgres: database schema version %d is newer than this binary's %d",
			*newest, ms[len(ms)-1].Version)
	}
	for _, m := range ms {
		err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			var n int
			if err := tx.QueryRow(ctx,
				`SELECT count(*) FROM schema_migrations WHERE version = $1`, m.Version).Scan(&n); err != nil {
				return err
			}
			if n > 0 {
				return nil
			}
			// No arguments: the simple protocol, which runs every
			// statement of the file.
			if _, err := tx.Exec(ctx, m.SQL); err != nil {
				return err
			}
			_, err := tx.Exec(ctx,
				`INSERT INTO schema_migrations (version, name, applied_at) VALUES ($1, $2, $3)`,
				m.Version, m.Name, nanos(db.now()))
			return err
		})
		if err != nil {
			return wrap(ctx, "migration "+m.Name, err)
		}
	}
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_unlock($1)`, migrateLock); err != nil {
		return wrap(ctx, "migrate: release the migration lock", err)
	}
	return nil
}
