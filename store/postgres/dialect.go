package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/store"
)

// Dialect is PostgreSQL's (through pgx) for package store.
type Dialect struct{}

var _ store.Dialect = Dialect{}

// Name implements store.Dialect.
func (Dialect) Name() string { return "postgres" }

// SQLSTATE codes the store tells apart.
const (
	codeUniqueViolation     = "23505"
	codeForeignKeyViolation = "23503"
	codeBadCharacter        = "22021" // character_not_in_repertoire: invalid UTF-8, NUL
	codeUntranslatable      = "22P05" // untranslatable_character: \u0000 in JSON
)

func pgError(err error) *pgconn.PgError {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe
	}
	return nil
}

// IsUnique implements store.Dialect: the key "table.column" is the
// constraint PostgreSQL names table_column_key.
func (Dialect) IsUnique(err error, key string) bool {
	pe := pgError(err)
	if pe == nil || pe.Code != codeUniqueViolation {
		return false
	}
	return key == "" || pe.ConstraintName == strings.ReplaceAll(key, ".", "_")+"_key"
}

// IsForeignKey implements store.Dialect.
func (Dialect) IsForeignKey(err error) bool {
	pe := pgError(err)
	return pe != nil && pe.Code == codeForeignKeyViolation
}

// Classify implements store.Dialect.
//
// store-unavailable: no connection could be made (refused, timed out,
// no such socket), the connection broke, or the server answered with a
// class 08 (connection), 53 (insufficient resources), 58 (system, I/O)
// error, is shutting down or starting (57P01..57P03), or is a read-only
// standby (25006). store-busy: a serialisation failure or deadlock
// (40001, 40P01), a lock not available (55P03) or a statement timeout
// (57014). The caller's own cancellation is not the store's failure and
// stays an ordinary error. Text that is not valid UTF-8 or holds a NUL
// (a lookup by a key no stored row can have: what is stored is cleaned
// first) is EINVALID.
func (Dialect) Classify(err error) *airlock.Error {
	if pe := pgError(err); pe != nil {
		switch c := pe.Code; {
		case c == codeBadCharacter || c == codeUntranslatable:
			return &airlock.Error{Code: airlock.EINVALID, Type: "invalid-text",
				Message: "a value is not valid UTF-8 text or holds a NUL byte", Err: err}
		case c == "40001" || c == "40P01" || c == "55P03" || c == "57014":
			return &airlock.Error{Code: airlock.EUNAVAILABLE, Type: airlock.ProblemStoreBusy,
				Message: "the metadata store (PostgreSQL) is busy; retry later", RetryAfter: store.BusyRetryAfter, Err: err}
		case len(c) == 5 && (c[:2] == "08" || c[:2] == "53" || c[:2] == "58"),
			c == "57P01" || c == "57P02" || c == "57P03" || c == "25006":
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

// Unavailable implements store.Dialect.
func (Dialect) Unavailable(err error) *airlock.Error { return storeUnavailable(err) }

func storeUnavailable(err error) *airlock.Error {
	return &airlock.Error{Code: airlock.EUNAVAILABLE, Type: airlock.ProblemStoreUnavailable,
		Message: "the metadata store (PostgreSQL) cannot be reached; retry later", RetryAfter: store.UnavailableRetryAfter, Err: err}
}

// Text implements store.Dialect: PostgreSQL text holds valid UTF-8 (the
// databases Airlock uses are UTF8) without NUL bytes; invalid UTF-8 and
// NUL become U+FFFD.
func (Dialect) Text(s string) string { return store.ValidText(s) }

// JSON implements store.Dialect: JSONB refuses the escape \u0000.
func (Dialect) JSON(b []byte) string { return store.ValidJSON(b) }

// JSONSet implements store.Dialect.
func (Dialect) JSONSet(column, key, value string) string {
	return fmt.Sprintf("%s || jsonb_build_object(CAST(%s AS text), CAST(%s AS float8))", column, key, value)
}

// ReadTx implements store.Dialect: one snapshot for the whole
// transaction.
func (Dialect) ReadTx() *sql.TxOptions {
	return &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true}
}

// migrateLock is the key of the advisory lock held while migrating, the
// same on every node ("airlock" "migr" in ASCII).
const migrateLock int64 = 0x61_69_72_6c_6d_69_67_72

// LockMigrations implements store.Dialect: a session-level advisory
// lock, so that nodes starting at once migrate one after the other.
// Migrating waits as long as it must (for another node's migration, for
// the locks of nodes serving): the caller's context bounds it.
func (Dialect) LockMigrations(ctx context.Context, conn *sql.Conn) (func(context.Context) error, error) {
	if _, err := conn.ExecContext(ctx, `SET lock_timeout = 0`); err != nil {
		return nil, err
	}
	if _, err := conn.ExecContext(ctx, `SELECT pg_advisory_lock($1)`, migrateLock); err != nil {
		return nil, err
	}
	return func(ctx context.Context) error {
		_, err := conn.ExecContext(ctx, `SELECT pg_advisory_unlock($1)`, migrateLock)
		return err
	}, nil
}
