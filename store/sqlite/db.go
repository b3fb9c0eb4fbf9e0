package sqlite

import (
	"context"
	"crypto/rand"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/oklog/ulid/v2"
	_ "modernc.org/sqlite" // registers the "sqlite" driver
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/airlockhq/airlock"
)

var _ airlock.Store = (*DB)(nil)

// DefaultBusyTimeout is how long a connection waits for a lock held by
// another connection (or process) before SQLITE_BUSY.
const DefaultBusyTimeout = 5 * time.Second

// Config configures Open.
type Config struct {
	// Path is the database file. It is created (mode 0600) if missing, with
	// its parent directory (mode 0700). URIs and ":memory:" are not accepted:
	// the writer and reader pools must share one file.
	Path string
	// Now is the clock; time.Now if nil.
	Now func() time.Time
	// BusyTimeout is SQLite's busy_timeout; DefaultBusyTimeout if zero.
	BusyTimeout time.Duration
	// MaxReaders caps the read pool; max(4, GOMAXPROCS) if zero.
	MaxReaders int
	// NodeID is the fleet node this process is ("" without a fleet): new
	// sessions and executions carry it, and what the reconciler ends at
	// start (LiveSessions, FailRunningExecutions) is this node's alone.
	NodeID string
}

// Validate reports whether c can be used to open a database.
func (c Config) Validate() error {
	switch {
	case c.Path == "":
		return airlock.Errorf(airlock.EINVALID, "sqlite: path is required")
	case c.Path == ":memory:" || strings.HasPrefix(c.Path, "file:"):
		return airlock.Errorf(airlock.EINVALID, "sqlite: path must be a file path, not %q", c.Path)
	case strings.ContainsAny(c.Path, "?\x00"):
		return airlock.Errorf(airlock.EINVALID, "sqlite: path must not contain '?' or NUL")
	case c.BusyTimeout < 0:
		return airlock.Errorf(airlock.EINVALID, "sqlite: busy timeout must not be negative")
	case c.MaxReaders < 0:
		return airlock.Errorf(airlock.EINVALID, "sqlite: max readers must not be negative")
	}
	return nil
}

// DB is the SQLite store. All writes go through one connection (SQLite has
// one writer at a time anyway; queueing them in the pool avoids SQLITE_BUSY);
// reads use a separate pool and, in WAL mode, never wait for a write.
type DB struct {
	write   *sql.DB
	read    *sql.DB
	now     func() time.Time
	entropy *ulid.LockedMonotonicReader
	node    string // Config.NodeID
}

// Open opens (creating if needed) the database at cfg.Path and applies any
// pending migrations.
func Open(ctx context.Context, cfg Config) (*DB, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.BusyTimeout == 0 {
		cfg.BusyTimeout = DefaultBusyTimeout
	}
	if cfg.MaxReaders == 0 {
		cfg.MaxReaders = max(4, runtime.GOMAXPROCS(0))
	}
	path, err := filepath.Abs(cfg.Path)
	if err != nil {
		return nil, fmt.Errorf("sqlite: %w", err)
	}
	if err := createFile(path); err != nil {
		return nil, err
	}

	db := &DB{
		node:    cfg.NodeID,
		now:     cfg.Now,
		entropy: &ulid.LockedMonotonicReader{MonotonicReader: ulid.Monotonic(rand.Reader, 0)},
	}
	busy := fmt.Sprintf("busy_timeout(%d)", cfg.BusyTimeout.Milliseconds())

	// journal_mode is persistent in the file: set it once, on the writer.
	db.write, err = sql.Open("sqlite", dsn(path, "immediate",
		busy, "journal_mode(WAL)", "synchronous(NORMAL)", "foreign_keys(1)"))
	if err != nil {
		return nil, fmt.Errorf("sqlite: open writer: %w", err)
	}
	db.write.SetMaxOpenConns(1)
	db.write.SetMaxIdleConns(1)
	db.write.SetConnMaxLifetime(0)
	db.write.SetConnMaxIdleTime(0)

	if err := db.migrate(ctx); err != nil {
		db.write.Close()
		return nil, err
	}

	// Opened after migration, so readers always see WAL mode and the schema.
	db.read, err = sql.Open("sqlite", dsn(path, "",
		busy, "synchronous(NORMAL)", "foreign_keys(1)", "query_only(1)"))
	if err != nil {
		db.write.Close()
		return nil, fmt.Errorf("sqlite: open reader: %w", err)
	}
	db.read.SetMaxOpenConns(cfg.MaxReaders)
	db.read.SetMaxIdleConns(cfg.MaxReaders)
	if err := db.read.PingContext(ctx); err != nil {
		db.Close()
		return nil, wrap("open reader", err)
	}
	return db, nil
}

// Close closes both pools. Methods called after Close return errors.
func (db *DB) Close() error {
	var errs []error
	if db.read != nil {
		errs = append(errs, db.read.Close())
	}
	if db.write != nil {
		errs = append(errs, db.write.Close())
	}
	return errors.Join(errs...)
}

// createFile makes sure the database file exists with mode 0600 before
// SQLite opens it; SQLite gives the -wal and -shm files the same mode.
func createFile(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return storeUnavailable(fmt.Errorf("sqlite: %w", err))
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return storeUnavailable(fmt.Errorf("sqlite: %w", err))
	}
	return f.Close()
}

// dsn builds a modernc.org/sqlite data source name for a plain file path.
func dsn(path, txlock string, pragmas ...string) string {
	var b strings.Builder
	b.WriteString(path)
	sep := byte('?')
	for _, p := range pragmas {
		b.WriteByte(sep)
		b.WriteString("_pragma=")
		b.WriteString(p)
		sep = '&'
	}
	if txlock != "" {
		b.WriteByte(sep)
		b.WriteString("_txlock=")
		b.WriteString(txlock)
	}
	return b.String()
}

// newID returns a new ULID stamped with the store's clock.
func (db *DB) newID(now time.Time) string {
	return ulid.MustNew(ulid.Timestamp(now), db.entropy).String()
}

// inWriteTx runs fn in a write transaction, committing if it returns nil.
func (db *DB) inWriteTx(ctx context.Context, fn func(*sql.Tx) error) error {
	tx, err := db.write.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		tx.Rollback()
		return err
	}
	return tx.Commit()
}

// inReadTx runs fn in a read transaction: one consistent snapshot.
func (db *DB) inReadTx(ctx context.Context, fn func(*sql.Tx) error) error {
	tx, err := db.read.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if err := fn(tx); err != nil {
		return err
	}
	return tx.Commit()
}

// sqliteCode returns the extended SQLite result code of err, or 0.
func sqliteCode(err error) int {
	var e interface{ Code() int }
	if errors.As(err, &e) {
		return e.Code()
	}
	return 0
}

func isUnique(err error) bool {
	c := sqliteCode(err)
	return c == sqlite3.SQLITE_CONSTRAINT_UNIQUE || c == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY
}

func isForeignKey(err error) bool {
	return sqliteCode(err) == sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY
}

// wrap adds the operation to a driver error. Domain errors pass through
// unchanged; a store that is busy or cannot do I/O becomes EUNAVAILABLE
// (see unavailable); anything else has code EINTERNAL (see
// airlock.ErrorCode) and is logged by the caller, never shown to a client.
func wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	var ae *airlock.Error
	if errors.As(err, &ae) {
		return err
	}
	err = fmt.Errorf("sqlite: %s: %w", op, err)
	if e := unavailable(err); e != nil {
		return e
	}
	return err
}

// How long a client is asked to wait before it retries a request that
// found the store busy or unavailable.
const (
	BusyRetryAfter        = 2 * time.Second
	UnavailableRetryAfter = 5 * time.Second
)

// Problem types of a store that cannot serve for now.
const (
	ProblemStoreBusy        = airlock.ProblemStoreBusy
	ProblemStoreUnavailable = airlock.ProblemStoreUnavailable
)

// unavailable returns the domain error for a driver error that says the
// store cannot serve for now, or nil: SQLITE_BUSY and SQLITE_LOCKED
// (another connection or process holds a lock past the busy timeout) are
// store-busy; I/O errors, a file that cannot be opened, a full disk and a
// read-only database are store-unavailable. Both are EUNAVAILABLE (503)
// with a RetryAfter; the cause stays in Err, for the log.
func unavailable(err error) *airlock.Error {
	switch sqliteCode(err) & 0xff {
	case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED, sqlite3.SQLITE_PROTOCOL:
		return &airlock.Error{Code: airlock.EUNAVAILABLE, Type: ProblemStoreBusy,
			Message: "the metadata store (SQLite) is busy; retry later", RetryAfter: BusyRetryAfter, Err: err}
	case sqlite3.SQLITE_IOERR, sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_FULL, sqlite3.SQLITE_READONLY:
		return storeUnavailable(err)
	}
	return nil
}

func storeUnavailable(err error) *airlock.Error {
	return &airlock.Error{Code: airlock.EUNAVAILABLE, Type: ProblemStoreUnavailable,
		Message: "the metadata store (SQLite) cannot be read or written; retry later", RetryAfter: UnavailableRetryAfter, Err: err}
}

// nanos and fromNanos convert between times and the stored form: UTC
// nanoseconds since the Unix epoch.
func nanos(t time.Time) int64 { return t.UnixNano() }

func fromNanos(n int64) time.Time { return time.Unix(0, n).UTC() }

func nullNanos(t *time.Time) sql.NullInt64 {
	if t == nil {
		return sql.NullInt64{}
	}
	return sql.NullInt64{Int64: nanos(*t), Valid: true}
}

func fromNullNanos(n sql.NullInt64) *time.Time {
	if !n.Valid {
		return nil
	}
	t := fromNanos(n.Int64)
	return &t
}

// stamp returns t, or now if t is zero, rounded to what the store keeps.
func stamp(t, now time.Time) time.Time {
	if t.IsZero() {
		t = now
	}
	return fromNanos(nanos(t))
}
