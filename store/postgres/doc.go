// Package postgres implements airlock.Store, and every other store
// interface the domain declares (sessions and idempotency keys, egress,
// E2B sandboxes, quotas and usage, abuse events and quarantines, tenant
// data keys, snapshots and pauses), on a PostgreSQL server through
// github.com/jackc/pgx/v5 (a pgxpool pool): the shared records of a
// fleet, where any node answers any read. SQLite (package sqlite) stays
// the single-node default; both pass one store test suite
// (internal/storetest).
//
// It owns the schema in the database it is given and the embedded
// migrations in migrations/: the same version numbers as the SQLite
// store's, with the same meaning in PostgreSQL's dialect (times are UTC
// nanoseconds since the Unix epoch in BIGINT, as in SQLite; JSON values
// are JSONB; booleans BOOLEAN). Open applies pending migrations, each in
// its own transaction with its record in schema_migrations, holding a
// session-level advisory lock so that several nodes starting at once
// migrate one after the other; a database whose schema is newer than
// the binary is refused.
//
// A store that cannot serve for now is not an internal error: a server
// that cannot be reached, refuses connections, does not answer within
// the operation's timeout (Config.OpTimeout, each method's bound), is
// shutting down, is a read-only standby or lacks resources is
// EUNAVAILABLE "store-unavailable"; a lock held elsewhere past the
// lock timeout (PostgreSQL's lock_timeout, as SQLite's busy timeout), a
// statement timeout, a serialisation failure or a deadlock is
// EUNAVAILABLE "store-busy". Both carry a
// RetryAfter (a 503 with Retry-After at the API) and keep the driver's
// error for the log. A method returns only once its transaction has
// committed: nothing it acknowledged is lost when the server goes away
// after.
//
// Every query that reads a tenant's record is keyed by the tenant as
// well as the ID: another tenant's row is ErrNotFound. It keeps metadata
// only (artifact bytes belong to an airlock.Blobs; API key secrets are
// never stored, only their hashes). It must not import any other
// implementation package, nor be imported by the domain package, and it
// touches no schema but its own tables in the database it is given.
package postgres
