// Package store implements airlock.Store, and every other store
// interface the domain declares (sessions and idempotency keys, egress,
// E2B sandboxes, quotas and usage, abuse events and quarantines, tenant
// data keys, snapshots and pauses, the fleet's reaper), once, over
// database/sql, for SQLite (package sqlite, the single-node default) and
// PostgreSQL (package postgres, the shared records of a fleet). Both pass
// one store test suite (store/storetest).
//
// Every query is written once, with numbered placeholders ($1, $2, ...)
// that both drivers bind, in the SQL both databases speak (ON CONFLICT,
// RETURNING, row values, FILTER). What differs is a Dialect: error
// classification (EUNAVAILABLE store-busy and store-unavailable with a
// RetryAfter, unique and foreign-key violations), cleaning of text that
// PostgreSQL cannot hold (invalid UTF-8 and NUL become U+FFFD), setting
// a key of a JSON object, read transactions' options and the migration
// lock. The schema is the one set of migrations in store/migrations,
// applied by Open in order, each in its own transaction with its record
// in schema_migrations; a database whose schema is newer than the binary
// is refused.
//
// Times are UTC nanoseconds since the Unix epoch. Every query that reads
// a tenant's record is keyed by the tenant as well as the ID: another
// tenant's row is ErrNotFound. A method returns only once its transaction
// has committed. It keeps metadata only (artifact bytes belong to an
// airlock.Blobs; API key secrets are never stored, only their hashes).
// It must not import any other implementation package, nor be imported
// by the domain package, and it touches no schema but its own tables.
package store
