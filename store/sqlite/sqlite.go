package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" driver

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/store"
)

// DB is the store on SQLite.
type DB = store.DB

// DefaultBusyTimeout is how long a connection waits for a lock held by
// another connection (or process) before SQLITE_BUSY.
const DefaultBusyTimeout = 5 * time.Second

// The store's list limits and the problem types of a store that cannot
// serve for now.
const (
	DefaultListLimit        = store.DefaultListLimit
	MaxListLimit            = store.MaxListLimit
	ProblemStoreBusy        = airlock.ProblemStoreBusy
	ProblemStoreUnavailable = airlock.ProblemStoreUnavailable
)

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

// Open opens (creating if needed) the database at cfg.Path and applies any
// pending migrations. All writes go through one connection (SQLite has
// one writer at a time anyway; queueing them in the pool avoids
// SQLITE_BUSY); reads use a separate pool and, in WAL mode, never wait
// for a write.
func Open(ctx context.Context, cfg Config) (*DB, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
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
	busy := fmt.Sprintf("busy_timeout(%d)", cfg.BusyTimeout.Milliseconds())

	// journal_mode is persistent in the file: set it once, on the writer.
	write, err := sql.Open("sqlite", dsn(path, "immediate",
		busy, "journal_mode(WAL)", "synchronous(NORMAL)", "foreign_keys(1)"))
	if err != nil {
		return nil, fmt.Errorf("sqlite: open writer: %w", err)
	}
	write.SetMaxOpenConns(1)
	write.SetMaxIdleConns(1)
	write.SetConnMaxLifetime(0)
	write.SetConnMaxIdleTime(0)

	// The readers connect when first used, after the migrations: they
	// always see WAL mode and the schema.
	read, err := sql.Open("sqlite", dsn(path, "",
		busy, "synchronous(NORMAL)", "foreign_keys(1)", "query_only(1)"))
	if err != nil {
		write.Close()
		return nil, fmt.Errorf("sqlite: open reader: %w", err)
	}
	read.SetMaxOpenConns(cfg.MaxReaders)
	read.SetMaxIdleConns(cfg.MaxReaders)
	return store.Open(ctx, store.Config{
		Dialect: Dialect{},
		Write:   write,
		Read:    read,
		Now:     cfg.Now,
		NodeID:  cfg.NodeID,
	})
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
