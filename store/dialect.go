package store

import (
	"context"
	"database/sql"

	"github.com/airlockhq/airlock"
)

// Dialect is what differs between the SQL databases the store runs on.
// Every query is written once, with $1, $2, ... placeholders (which both
// drivers bind by number), in the SQL both databases speak; a dialect
// says the rest. Package sqlite and package postgres implement it.
type Dialect interface {
	// Name is "sqlite" or "postgres": which migrations apply (see
	// package migrations), and the prefix of the store's errors.
	Name() string

	// Classify returns the domain error for a driver error that says the
	// store cannot serve for now (EUNAVAILABLE store-busy or
	// store-unavailable, with a RetryAfter) or that a value cannot be
	// stored (EINVALID), keeping err; nil for any other error.
	Classify(err error) *airlock.Error
	// Unavailable is the store-unavailable error of the dialect for err
	// (a server that did not answer within Config.OpTimeout, say).
	Unavailable(err error) *airlock.Error
	// IsUnique reports whether err is a unique-key violation; with key
	// ("table.column") set, one of that column's.
	IsUnique(err error, key string) bool
	// IsForeignKey reports whether err is a foreign-key violation.
	IsForeignKey(err error) bool

	// Text makes a free-form string storable as text, and JSON a
	// document encoding/json made storable as a JSON value.
	Text(s string) string
	JSON(b []byte) string
	// JSONSet is the SQL expression of the JSON object in column with
	// the key (an SQL expression of text) set to the number value (an
	// SQL expression).
	JSONSet(column, key, value string) string

	// ReadTx are the options of a read-only transaction on one snapshot.
	ReadTx() *sql.TxOptions
	// LockMigrations takes what keeps two processes from migrating the
	// database at once, on conn, and returns its release.
	LockMigrations(ctx context.Context, conn *sql.Conn) (unlock func(context.Context) error, err error)
}
