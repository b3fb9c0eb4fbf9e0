// Package postgres opens the store (package store) on a PostgreSQL
// server through github.com/jackc/pgx/v5 (a pgxpool pool under
// database/sql by pgx's stdlib driver): the shared records of a fleet,
// where any node answers any read. It holds PostgreSQL's Dialect and its
// Config and Open; the queries and migrations are package store's (times
// are BIGINT nanoseconds, JSON values JSONB, booleans BOOLEAN).
//
// Open applies pending migrations holding a session-level advisory lock
// on a connection of its own, so that several nodes starting at once
// migrate one after the other.
//
// A store that cannot serve for now is not an internal error: a server
// that cannot be reached, refuses connections, does not answer within
// the operation's timeout (Config.OpTimeout, each method's bound), is
// shutting down, is a read-only standby or lacks resources is
// EUNAVAILABLE "store-unavailable"; a lock held elsewhere past the
// lock timeout (PostgreSQL's lock_timeout, as SQLite's busy timeout), a
// statement timeout, a serialisation failure or a deadlock is
// EUNAVAILABLE "store-busy". Both carry a RetryAfter (a 503 with
// Retry-After at the API) and keep the driver's error for the log.
// PostgreSQL text holds valid UTF-8 without NUL, and JSONB refuses
// \u0000: what a sandbox printed or sent is cleaned on the way in
// (invalid UTF-8 and NUL become U+FFFD).
//
// It must not import any other implementation package, nor be imported
// by the domain package, and it touches no schema but its own tables in
// the database it is given.
package postgres
