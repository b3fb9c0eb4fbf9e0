package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/fleet"
	"github.com/airlockhq/airlock/internal/seal"
	"github.com/airlockhq/airlock/store"
	"github.com/airlockhq/airlock/store/postgres"
	"github.com/airlockhq/airlock/store/sqlite"
)

// metaStore is what airlockd's parts take of the metadata store, each
// the interface of its own (the API the Store, the sessions the
// SessionStore, the quotas the QuotaStore, ...): the union of them. The
// one SQL store (package store) is one, on SQLite and on PostgreSQL.
type metaStore interface {
	airlock.Store
	airlock.SessionStore
	airlock.EgressStore
	airlock.E2BStore
	airlock.QuotaStore
	airlock.AbuseStore
	airlock.KeepStore
	airlock.AuditStore
	airlock.BrokerGrantStore
	airlock.TenantDeleter
	seal.KeyStore
	fleet.Store
}

var _ metaStore = (*store.DB)(nil)

// storeOptions say which metadata store the node uses.
type storeOptions struct {
	store string // "sqlite", or a postgres:// URL
}

func (o *storeOptions) register(fs *flag.FlagSet) {
	// The default is not taken from the environment here, so that -help
	// never prints a URL that may hold a password.
	fs.StringVar(&o.store, "store", "", `metadata store: "sqlite" (the default: <state-dir>/airlock.db, one node) or a PostgreSQL URL, postgres://user@host:5432/db?sslmode=verify-full (shared records; a password is better in PGPASSWORD or ~/.pgpass than in the URL) (env AIRLOCK_STORE)`)
}

// resolve fills the option from the environment and checks it, so a bad
// value stops airlockd before it does anything.
func (o *storeOptions) resolve() error {
	if o.store == "" {
		o.store = os.Getenv("AIRLOCK_STORE")
	}
	if o.store == "" {
		o.store = "sqlite"
	}
	if o.store == "sqlite" {
		return nil
	}
	if !o.postgres() {
		return fmt.Errorf(`--store: want "sqlite" or a postgres:// URL, not %q`, redact(o.store))
	}
	if err := (postgres.Config{DSN: o.store}).Validate(); err != nil {
		return fmt.Errorf("--store: %v", airlock.ErrorMessage(err))
	}
	return nil
}

func (o *storeOptions) postgres() bool {
	return strings.HasPrefix(o.store, "postgres://") || strings.HasPrefix(o.store, "postgresql://")
}

// redact cuts a value that is not a store's name to its scheme: it may
// hold a password.
func redact(s string) string {
	if scheme, _, ok := strings.Cut(s, "://"); ok {
		return scheme + "://..."
	}
	if len(s) > 16 {
		return s[:16] + "..."
	}
	return s
}

// open opens the store (applying its migrations). nodeID is the fleet
// node's ("" without a fleet): its records carry it.
func (o storeOptions) open(ctx context.Context, stateDir, nodeID string, logger *slog.Logger) (metaStore, error) {
	if o.postgres() {
		db, err := postgres.Open(ctx, postgres.Config{DSN: o.store, NodeID: nodeID})
		if err != nil {
			return nil, fmt.Errorf("open the PostgreSQL store: %w", err)
		}
		logger.Info("metadata store: PostgreSQL")
		return db, nil
	}
	path := filepath.Join(stateDir, "airlock.db")
	db, err := sqlite.Open(ctx, sqlite.Config{Path: path, NodeID: nodeID})
	if err != nil {
		return nil, err
	}
	logger.Info("metadata store: SQLite", "path", path)
	return db, nil
}
