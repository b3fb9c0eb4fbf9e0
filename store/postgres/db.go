package postgres

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/oklog/ulid/v2"

	"github.com/airlockhq/airlock"
)

var _ airlock.Store = (*DB)(nil)

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

// DB is the PostgreSQL store: one pool of connections for reads and
// writes (the server serialises what must be).
type DB struct {
	pool      *pgxpool.Pool
	now       func() time.Time
	opTimeout time.Duration
	entropy   *ulid.LockedMonotonicReader
	node      string // Config.NodeID
}

// Open connects to the database of cfg.DSN and applies any pending
// migrations. A server that cannot be reached is EUNAVAILABLE.
func Open(ctx context.Context, cfg Config) (*DB, error) {
	pc, err := cfg.poolConfig()
	if err != nil {
		return nil, err
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, wrap(ctx, "open", err)
	}
	db := &DB{
		pool:      pool,
		node:      cfg.NodeID,
		now:       cfg.Now,
		opTimeout: cfg.OpTimeout,
		entropy:   &ulid.LockedMonotonicReader{MonotonicReader: ulid.Monotonic(rand.Reader, 0)},
	}
	if db.opTimeout == 0 {
		db.opTimeout = DefaultOpTimeout
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, wrap(ctx, "connect", err)
	}
	if err := db.migrate(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	return db, nil
}

// Close closes the pool, waiting for connections in use to be returned.
// Methods called after Close return errors.
func (db *DB) Close() error {
	db.pool.Close()
	return nil
}

// errOpTimeout is the cause of an operation's context that ran out of
// its time (Config.OpTimeout).
var errOpTimeout = errors.New("the PostgreSQL server did not answer within the store's timeout")

// bound gives one operation its timeout: a server that stops answering
// (gone from the network, stuck) is a 503, not a request that hangs.
func (db *DB) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeoutCause(ctx, db.opTimeout, errOpTimeout)
}

// newID returns a new ULID stamped with the store's clock.
func (db *DB) newID(now time.Time) string {
	return ulid.MustNew(ulid.Timestamp(now), db.entropy).String()
}

// inTx runs fn in a read-write transaction, committing if it returns nil.
func (db *DB) inTx(ctx context.Context, fn func(pgx.Tx) error) error {
	return pgx.BeginFunc(ctx, db.pool, fn)
}

// inReadTx runs fn in a read-only transaction on one snapshot.
func (db *DB) inReadTx(ctx context.Context, fn func(pgx.Tx) error) error {
	return pgx.BeginTxFunc(ctx, db.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, fn)
}

// SQLSTATE codes the store tells apart.
const (
	codeUniqueViolation     = "23505"
	codeForeignKeyViolation = "23503"
	codeBadCharacter        = "22021" // character_not_in_repertoire: invalid UTF-8, NUL
	codeUntranslatable      = "22P05" // untranslatable_character: \u0000 in JSON
)

func pgCode(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

func constraint(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.ConstraintName
	}
	return ""
}

func isUnique(err error) bool { return pgCode(err) == codeUniqueViolation }

func isForeignKey(err error) bool { return pgCode(err) == codeForeignKeyViolation }

// wrap adds the operation to a driver error. Domain errors pass through
// unchanged; a server that cannot serve for now, or that did not answer
// within the operation's timeout (ctx is the operation's, see bound),
// becomes EUNAVAILABLE (see unavailable); anything else has code EINTERNAL (see
// airlock.ErrorCode) and is logged by the caller, never shown to a client.
func wrap(ctx context.Context, op string, err error) error {
	if err == nil {
		return nil
	}
	var ae *airlock.Error
	if errors.As(err, &ae) {
		return err
	}
	err = fmt.Errorf("postgres: %s: %w", op, err)
	if errors.Is(err, context.DeadlineExceeded) && errors.Is(context.Cause(ctx), errOpTimeout) {
		return storeUnavailable(fmt.Errorf("%w: %w", errOpTimeout, err))
	}
	if c := pgCode(err); c == codeBadCharacter || c == codeUntranslatable {
		// A lookup by a key no stored row can have (what is stored is
		// cleaned first, see clean).
		return &airlock.Error{Code: airlock.EINVALID, Type: "invalid-text",
			Message: "a value is not valid UTF-8 text or holds a NUL byte", Err: err}
	}
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

// unavailable returns the domain error for a driver error that says the
// server cannot serve for now, or nil.
//
// store-unavailable: no connection could be made (refused, timed out,
// no such socket), the connection broke, or the server answered with a
// class 08 (connection), 53 (insufficient resources), 58 (system, I/O)
// error, is shutting down or starting (57P01..57P03), or is a read-only
// standby (25006). store-busy: a serialisation failure or deadlock
// (40001, 40P01), a lock not available (55P03) or a statement timeout
// (57014, when the caller's context has not ended). The caller's own
// cancellation is not the store's failure and stays an ordinary error.
func unavailable(err error) *airlock.Error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch {
		case pe.Code == "40001" || pe.Code == "40P01" || pe.Code == "55P03" || pe.Code == "57014":
			return storeBusy(err)
		case len(pe.Code) == 5 && (pe.Code[:2] == "08" || pe.Code[:2] == "53" || pe.Code[:2] == "58"),
			pe.Code == "57P01" || pe.Code == "57P02" || pe.Code == "57P03" || pe.Code == "25006":
			return storeUnavailable(err)
		}
		return nil
	}
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) {
		return storeUnavailable(err)
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return nil
	}
	var ne net.Error
	switch {
	case errors.As(err, &ne),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, syscall.EPIPE), errors.Is(err, syscall.ENOENT):
		return storeUnavailable(err)
	}
	return nil
}

func storeBusy(err error) *airlock.Error {
	return &airlock.Error{Code: airlock.EUNAVAILABLE, Type: airlock.ProblemStoreBusy,
		Message: "the metadata store (PostgreSQL) is busy; retry later", RetryAfter: BusyRetryAfter, Err: err}
}

func storeUnavailable(err error) *airlock.Error {
	return &airlock.Error{Code: airlock.EUNAVAILABLE, Type: airlock.ProblemStoreUnavailable,
		Message: "the metadata store (PostgreSQL) cannot be reached; retry later", RetryAfter: UnavailableRetryAfter, Err: err}
}

// nanos and fromNanos convert between times and the stored form: UTC
// nanoseconds since the Unix epoch.
func nanos(t time.Time) int64 { return t.UnixNano() }

func fromNanos(n int64) time.Time { return time.Unix(0, n).UTC() }

func nullNanos(t *time.Time) *int64 {
	if t == nil {
		return nil
	}
	n := nanos(*t)
	return &n
}

func fromNullNanos(n *int64) *time.Time {
	if n == nil {
		return nil
	}
	t := fromNanos(*n)
	return &t
}

// stamp returns t, or now if t is zero, rounded to what the store keeps.
func stamp(t, now time.Time) time.Time {
	if t.IsZero() {
		t = now
	}
	return fromNanos(nanos(t))
}

// scanner is a row or rows.
type scanner interface{ Scan(...any) error }
