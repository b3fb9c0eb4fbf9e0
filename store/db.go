package store

import (
	"context"
	"crypto/rand"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/airlockhq/airlock"
)

var _ airlock.Store = (*DB)(nil)

// List limits for ListExecutions (and the other lists).
const (
	DefaultListLimit = 50
	MaxListLimit     = 500
)

// How long a client is asked to wait before it retries a request that
// found the store busy or unavailable.
const (
	BusyRetryAfter        = 2 * time.Second
	UnavailableRetryAfter = 5 * time.Second
)

// Config configures Open. The dialect packages (sqlite, postgres) fill
// it from their own Config.
type Config struct {
	// Dialect is the database's; required.
	Dialect Dialect
	// Write serves writes and every transaction that writes; required.
	Write *sql.DB
	// Read serves reads; Write if nil.
	Read *sql.DB
	// Migrate is where the migrations run, holding the dialect's
	// migration lock; Write if nil. Open leaves it open.
	Migrate *sql.DB
	// OnClose runs after Close has closed Read and Write.
	OnClose func()
	// Now is the clock; time.Now if nil.
	Now func() time.Time
	// OpTimeout bounds each operation (a query or a transaction,
	// connecting included); none if zero.
	OpTimeout time.Duration
	// NodeID is the fleet node this process is ("" without a fleet): new
	// sessions and executions carry it, and what the reconciler ends at
	// start (LiveSessions, FailRunningExecutions) is this node's alone.
	NodeID string
}

// Validate reports whether c can be used to open a store.
func (c Config) Validate() error {
	switch {
	case c.Dialect == nil:
		return airlock.Errorf(airlock.EINVALID, "store: a dialect is required")
	case c.Write == nil:
		return airlock.Errorf(airlock.EINVALID, "store: a database is required")
	case c.OpTimeout < 0:
		return airlock.Errorf(airlock.EINVALID, "store: the operation timeout must not be negative")
	}
	return nil
}

// DB is the store: writes go through Config.Write, reads through
// Config.Read (for SQLite one writer connection and a pool of readers;
// for PostgreSQL one pool for both).
type DB struct {
	d         Dialect
	write     *sql.DB
	read      *sql.DB
	onClose   func()
	now       func() time.Time
	opTimeout time.Duration
	entropy   *ulid.LockedMonotonicReader
	node      string // Config.NodeID
}

// Open applies any pending migrations and returns the store. It owns
// cfg.Write and cfg.Read from then on (closing them if it fails).
func Open(ctx context.Context, cfg Config) (*DB, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Read == nil {
		cfg.Read = cfg.Write
	}
	if cfg.Migrate == nil {
		cfg.Migrate = cfg.Write
	}
	db := &DB{
		d:         cfg.Dialect,
		write:     cfg.Write,
		read:      cfg.Read,
		onClose:   cfg.OnClose,
		now:       cfg.Now,
		opTimeout: cfg.OpTimeout,
		entropy:   &ulid.LockedMonotonicReader{MonotonicReader: ulid.Monotonic(rand.Reader, 0)},
		node:      cfg.NodeID,
	}
	if err := db.migrate(ctx, cfg.Migrate); err != nil {
		db.Close()
		return nil, err
	}
	if err := db.read.PingContext(ctx); err != nil {
		db.Close()
		return nil, db.wrap(ctx, "open reader", err)
	}
	return db, nil
}

// Close closes the store's databases. Methods called after Close return
// errors.
func (db *DB) Close() error {
	var errs []error
	if db.read != nil && db.read != db.write {
		errs = append(errs, db.read.Close())
	}
	if db.write != nil {
		errs = append(errs, db.write.Close())
	}
	if db.onClose != nil {
		db.onClose()
	}
	return errors.Join(errs...)
}

// errOpTimeout is the cause of an operation's context that ran out of
// its time (Config.OpTimeout).
var errOpTimeout = errors.New("the database did not answer within the store's timeout")

// bound gives one operation its timeout: a server that stops answering
// (gone from the network, stuck) is a 503, not a request that hangs.
func (db *DB) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	if db.opTimeout <= 0 {
		return ctx, func() {}
	}
	return context.WithTimeoutCause(ctx, db.opTimeout, errOpTimeout)
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

// inReadTx runs fn in a read-only transaction on one snapshot.
func (db *DB) inReadTx(ctx context.Context, fn func(*sql.Tx) error) error {
	tx, err := db.read.BeginTx(ctx, db.d.ReadTx())
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if err := fn(tx); err != nil {
		return err
	}
	return tx.Commit()
}

// affected is how many rows a statement changed (both drivers know it
// from the statement's result, without an error).
func affected(res sql.Result) int64 {
	n, _ := res.RowsAffected()
	return n
}

func (db *DB) isUnique(err error) bool { return db.d.IsUnique(err, "") }

func (db *DB) isForeignKey(err error) bool { return db.d.IsForeignKey(err) }

// wrap adds the operation to a driver error (see Wrap).
func (db *DB) wrap(ctx context.Context, op string, err error) error {
	return Wrap(ctx, db.d, op, err)
}

// Wrap adds the operation to a driver error of the dialect's database.
// Domain errors pass through unchanged; a database that cannot serve for
// now, or that did not answer within the operation's timeout (ctx is the
// operation's, see Config.OpTimeout), becomes EUNAVAILABLE (see
// Dialect.Classify); anything else has code EINTERNAL (see
// airlock.ErrorCode) and is logged by the caller, never shown to a
// client.
func Wrap(ctx context.Context, d Dialect, op string, err error) error {
	if err == nil {
		return nil
	}
	var ae *airlock.Error
	if errors.As(err, &ae) {
		return err
	}
	err = fmt.Errorf("%s: %s: %w", d.Name(), op, err)
	if errors.Is(err, context.DeadlineExceeded) && errors.Is(context.Cause(ctx), errOpTimeout) {
		return d.Unavailable(fmt.Errorf("%w: %w", errOpTimeout, err))
	}
	if e := d.Classify(err); e != nil {
		return e
	}
	return err
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
