package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	sqlite3 "modernc.org/sqlite/lib"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/store"
)

// Dialect is SQLite's (modernc.org/sqlite) for package store.
type Dialect struct{}

var _ store.Dialect = Dialect{}

// Name implements store.Dialect.
func (Dialect) Name() string { return "sqlite" }

// sqliteCode returns the extended SQLite result code of err, or 0.
func sqliteCode(err error) int {
	var e interface{ Code() int }
	if errors.As(err, &e) {
		return e.Code()
	}
	return 0
}

// IsUnique implements store.Dialect: SQLite names the key's columns in
// its message ("UNIQUE constraint failed: tenants.name").
func (Dialect) IsUnique(err error, key string) bool {
	c := sqliteCode(err)
	if c != sqlite3.SQLITE_CONSTRAINT_UNIQUE && c != sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY {
		return false
	}
	return key == "" || strings.Contains(err.Error(), key)
}

// IsForeignKey implements store.Dialect.
func (Dialect) IsForeignKey(err error) bool {
	return sqliteCode(err) == sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY
}

// Classify implements store.Dialect: SQLITE_BUSY and SQLITE_LOCKED
// (another connection or process holds a lock past the busy timeout)
// are store-busy; I/O errors, a file that cannot be opened, a full disk
// and a read-only database are store-unavailable.
func (Dialect) Classify(err error) *airlock.Error {
	switch sqliteCode(err) & 0xff {
	case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED, sqlite3.SQLITE_PROTOCOL:
		return &airlock.Error{Code: airlock.EUNAVAILABLE, Type: ProblemStoreBusy,
			Message: "the metadata store (SQLite) is busy; retry later", RetryAfter: store.BusyRetryAfter, Err: err}
	case sqlite3.SQLITE_IOERR, sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_FULL, sqlite3.SQLITE_READONLY:
		return storeUnavailable(err)
	}
	return nil
}

// Unavailable implements store.Dialect.
func (Dialect) Unavailable(err error) *airlock.Error { return storeUnavailable(err) }

func storeUnavailable(err error) *airlock.Error {
	return &airlock.Error{Code: airlock.EUNAVAILABLE, Type: ProblemStoreUnavailable,
		Message: "the metadata store (SQLite) cannot be read or written; retry later", RetryAfter: store.UnavailableRetryAfter, Err: err}
}

// Text implements store.Dialect: SQLite keeps any bytes.
func (Dialect) Text(s string) string { return s }

// JSON implements store.Dialect: JSON is text.
func (Dialect) JSON(b []byte) string { return string(b) }

// JSONSet implements store.Dialect.
func (Dialect) JSONSet(column, key, value string) string {
	return fmt.Sprintf("json_set(%s, '$.' || %s, %s)", column, key, value)
}

// ReadTx implements store.Dialect: in WAL mode a read transaction sees
// one snapshot.
func (Dialect) ReadTx() *sql.TxOptions { return &sql.TxOptions{ReadOnly: true} }

// LockMigrations implements store.Dialect: every migration's transaction
// begins IMMEDIATE, holding the file's write lock, and finds its version
// recorded if another process applied it first.
func (Dialect) LockMigrations(context.Context, *sql.Conn) (func(context.Context) error, error) {
	return func(context.Context) error { return nil }, nil
}
