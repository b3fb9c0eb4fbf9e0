// Package sqlite opens the store (package store) on an embedded SQLite
// database (modernc.org/sqlite, pure Go, no cgo): the default store of a
// single-node Airlock. It holds SQLite's Dialect and its Config and
// Open; the queries and migrations are package store's.
//
// The file is opened in WAL mode with foreign keys on and
// synchronous=NORMAL; writes go through a single connection (each
// transaction BEGIN IMMEDIATE), reads through a separate pool, so a long
// write never blocks a read.
//
// A store that cannot serve for now is not an internal error: a lock held
// past the busy timeout by another connection or process (SQLITE_BUSY,
// SQLITE_LOCKED) is EUNAVAILABLE "store-busy", and I/O failures, a file
// that cannot be opened, a full disk or a read-only database are
// EUNAVAILABLE "store-unavailable"; both carry a RetryAfter (a 503 with
// Retry-After at the API) and keep the driver's error for the log.
//
// It must not import any other implementation package, nor be imported by
// the domain package.
package sqlite
