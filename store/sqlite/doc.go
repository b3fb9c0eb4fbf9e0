// Package sqlite implements airlock.Store on an embedded SQLite database
// (modernc.org/sqlite, pure Go, no cgo): the default store of a single-node
// Airlock.
//
// It owns the database file, its schema and the embedded migrations in
// migrations/ (numbered NNNN_name.sql, applied in order, each in its own
// transaction and recorded in schema_migrations). The file is opened in WAL
// mode with foreign keys on and synchronous=NORMAL; writes go through a
// single connection, reads through a separate pool, so a long write never
// blocks a read. Times are stored as UTC nanoseconds since the Unix epoch.
//
// A store that cannot serve for now is not an internal error: a lock held
// past the busy timeout by another connection or process (SQLITE_BUSY,
// SQLITE_LOCKED) is EUNAVAILABLE "store-busy", and I/O failures, a file
// that cannot be opened, a full disk or a read-only database are
// EUNAVAILABLE "store-unavailable"; both carry a RetryAfter (a 503 with
// Retry-After at the API) and keep the driver's error for the log.
//
// Every query that reads a tenant's execution or artifact is keyed by the
// tenant as well as the ID: another tenant's row is ErrNotFound.
//
// It keeps metadata only: artifact bytes belong to an airlock.Blobs (see
// blobdir), and API key secrets are never stored, only their hashes. It must
// not import any other implementation package, nor be imported by the
// domain package.
package sqlite
