package node

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/fleet"
	"github.com/airlockhq/airlock/internal/seal"
	"github.com/airlockhq/airlock/store/postgres"
	"github.com/airlockhq/airlock/store/sqlite"
)

// Store is what the node's parts take of the metadata store, each the
// interface of its own (the API the Store, the sessions the
// SessionStore, the quotas the QuotaStore, ...): the union of them. The
// SQLite and the PostgreSQL stores are both one.
type Store interface {
	airlock.Store
	airlock.SessionStore
	airlock.EgressStore
	airlock.E2BStore
	airlock.QuotaStore
	airlock.AbuseStore
	airlock.EventStore
	airlock.WebhookStore
	airlock.EventPruner
	airlock.KeepStore
	airlock.AuditStore
	airlock.BrokerGrantStore
	airlock.VolumeStore
	airlock.TenantDeleter
	airlock.TemplateStore
	seal.KeyStore
	fleet.Store
	Close() error
}

var (
	_ Store = (*sqlite.DB)(nil)
	_ Store = (*postgres.DB)(nil)
)

// StoreConfig says which metadata store the node uses.
type StoreConfig struct {
	// URL is "sqlite" (or empty: <state-dir>/airlock.db, one node) or a
	// postgres:// URL.
	URL string
}

func (c StoreConfig) postgres() bool {
	return strings.HasPrefix(c.URL, "postgres://") || strings.HasPrefix(c.URL, "postgresql://")
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
func (c StoreConfig) open(ctx context.Context, stateDir, nodeID string, logger *slog.Logger) (Store, error) {
	if c.postgres() {
		db, err := postgres.Open(ctx, postgres.Config{DSN: c.URL, NodeID: nodeID})
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
