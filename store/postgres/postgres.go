package postgres

import (
	"context"
	"fmt"
	"runtime"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/store"
)

// DB is the store on PostgreSQL.
type DB = store.DB

// The store's list limits.
const (
	DefaultListLimit = store.DefaultListLimit
	MaxListLimit     = store.MaxListLimit
)

// DefaultOpTimeout bounds each operation (a query or a transaction,
// connecting included) when Config.OpTimeout is zero.
const DefaultOpTimeout = 15 * time.Second

// DefaultLockTimeout is how long a statement waits for a lock another
// connection holds (PostgreSQL's lock_timeout) before store-busy, when
// neither Config.LockTimeout nor the DSN sets one; as SQLite's busy
// timeout.
const DefaultLockTimeout = 5 * time.Second

// DefaultConnectTimeout bounds each attempt to connect to the server when
// the DSN names no connect_timeout: a server that is gone is a quick 503,
// not a request that hangs.
const DefaultConnectTimeout = 5 * time.Second

// Config configures Open.
type Config struct {
	// DSN is the server and database: a postgres:// URL or a libpq
	// key=value string. Its password (if any) is never logged or
	// returned in an error.
	DSN string
	// Now is the clock; time.Now if nil.
	Now func() time.Time
	// MaxConns caps the connection pool; max(4, GOMAXPROCS) if zero.
	MaxConns int
	// ConnectTimeout bounds a connection attempt when the DSN sets none;
	// DefaultConnectTimeout if zero.
	ConnectTimeout time.Duration
	// OpTimeout bounds each operation; DefaultOpTimeout if zero.
	OpTimeout time.Duration
	// LockTimeout is PostgreSQL's lock_timeout for the store's
	// connections when the DSN sets none; DefaultLockTimeout if zero.
	LockTimeout time.Duration
	// NodeID is the fleet node this process is ("" without a fleet): new
	// sessions and executions carry it, and what the reconciler ends at
	// start (LiveSessions, FailRunningExecutions) is this node's alone.
	NodeID string
}

// Validate reports whether c can be used to open a store.
func (c Config) Validate() error {
	_, err := c.poolConfig()
	return err
}

func (c Config) poolConfig() (*pgxpool.Config, error) {
	switch {
	case c.DSN == "":
		return nil, airlock.Errorf(airlock.EINVALID, "postgres: a DSN is required")
	case c.MaxConns < 0:
		return nil, airlock.Errorf(airlock.EINVALID, "postgres: max conns must not be negative")
	case c.ConnectTimeout < 0 || c.OpTimeout < 0 || c.LockTimeout < 0:
		return nil, airlock.Errorf(airlock.EINVALID, "postgres: timeouts must not be negative")
	}
	pc, err := pgxpool.ParseConfig(c.DSN)
	if err != nil {
		// pgconn's parse errors leave the password out.
		return nil, airlock.Errorf(airlock.EINVALID, "postgres: bad DSN: %v", err)
	}
	if c.MaxConns > 0 {
		pc.MaxConns = int32(c.MaxConns)
	} else {
		pc.MaxConns = int32(max(4, runtime.GOMAXPROCS(0)))
	}
	if pc.ConnConfig.ConnectTimeout == 0 {
		pc.ConnConfig.ConnectTimeout = c.ConnectTimeout
		if pc.ConnConfig.ConnectTimeout == 0 {
			pc.ConnConfig.ConnectTimeout = DefaultConnectTimeout
		}
	}
	if pc.ConnConfig.RuntimeParams["lock_timeout"] == "" {
		lt := c.LockTimeout
		if lt == 0 {
			lt = DefaultLockTimeout
		}
		pc.ConnConfig.RuntimeParams["lock_timeout"] = fmt.Sprintf("%dms", lt.Milliseconds())
	}
	if pc.ConnConfig.RuntimeParams["application_name"] == "" {
		pc.ConnConfig.RuntimeParams["application_name"] = "airlockd"
	}
	// Times are integers, so the session's time zone never matters; UTC
	// keeps what an operator reads with psql the same on every node.
	pc.ConnConfig.RuntimeParams["timezone"] = "UTC"
	return pc, nil
}

// Open connects to the database of cfg.DSN and applies any pending
// migrations. A server that cannot be reached is EUNAVAILABLE. The store
// reads and writes through one pgx pool (database/sql over pgx's stdlib
// driver); migrations run on a connection of their own, closed after,
// which releases the migration lock even if unlocking failed.
func Open(ctx context.Context, cfg Config) (*DB, error) {
	pc, err := cfg.poolConfig()
	if err != nil {
		return nil, err
	}
	if cfg.OpTimeout == 0 {
		cfg.OpTimeout = DefaultOpTimeout
	}
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, store.Wrap(ctx, Dialect{}, "open", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, store.Wrap(ctx, Dialect{}, "connect", err)
	}
	migrate := stdlib.OpenDB(*pc.ConnConfig)
	migrate.SetMaxOpenConns(1)
	defer migrate.Close()
	return store.Open(ctx, store.Config{
		Dialect:   Dialect{},
		Write:     stdlib.OpenDBFromPool(pool),
		Migrate:   migrate,
		OnClose:   pool.Close,
		Now:       cfg.Now,
		OpTimeout: cfg.OpTimeout,
		NodeID:    cfg.NodeID,
	})
}
