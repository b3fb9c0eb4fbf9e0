package node

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/seal"
	"github.com/airlockhq/airlock/service/session"
)

// KeepConfig configures snapshots, pause and fork, and the master key
// that seals snapshots. Without a master key (in MasterKeyFile or the
// environment's AIRLOCK_MASTER_KEY) they are off.
type KeepConfig struct {
	MasterKeyFile string
	// OldMasterKeyFiles hold earlier master keys that still unwrap data
	// keys not yet rotated.
	OldMasterKeyFiles []string
	SnapshotQuotaMiB  int64
	MaxPausedAge      time.Duration
	// MasterKey, when set, is the master key itself (MasterKeyFile and
	// the environment are not read).
	MasterKey *seal.MasterKey
}

// masterKeys reads the current master key (file or environment) and any
// older ones; nil when none is configured.
func (o KeepConfig) masterKeys() (*seal.MasterKey, []*seal.MasterKey, error) {
	if o.MasterKey != nil {
		return o.MasterKey, nil, nil
	}
	var cur *seal.MasterKey
	var err error
	switch env := os.Getenv("AIRLOCK_MASTER_KEY"); {
	case o.MasterKeyFile != "" && env != "":
		return nil, nil, fmt.Errorf("give the master key in a file or in AIRLOCK_MASTER_KEY, not both")
	case o.MasterKeyFile != "":
		cur, err = seal.LoadMasterKey(o.MasterKeyFile)
	case env != "":
		cur, err = seal.ParseMasterKey(env)
		if err != nil {
			err = fmt.Errorf("AIRLOCK_MASTER_KEY: %w", err)
		}
	}
	if err != nil || cur == nil {
		return nil, nil, err
	}
	var old []*seal.MasterKey
	for _, p := range o.OldMasterKeyFiles {
		k, err := seal.LoadMasterKey(p)
		if err != nil {
			return nil, nil, err
		}
		old = append(old, k)
	}
	return cur, old, nil
}

// keepStore is what the keep work records: snapshots and pauses, and the
// tenants' data keys.
type keepStore interface {
	airlock.KeepStore
	seal.KeyStore
}

// config is the session manager's keep config; empty (off) without a
// master key.
func (o KeepConfig) config(stateDir string, store keepStore, blobs airlock.Blobs, logger *slog.Logger) (session.KeepConfig, error) {
	cur, old, err := o.masterKeys()
	if err != nil {
		return session.KeepConfig{}, err
	}
	if cur == nil {
		logger.Info("no master key (--master-key-file or AIRLOCK_MASTER_KEY): snapshots, pause and fork are off")
		return session.KeepConfig{}, nil
	}
	if o.SnapshotQuotaMiB <= 0 || o.MaxPausedAge <= 0 {
		return session.KeepConfig{}, fmt.Errorf("--snapshot-quota-mib and --max-paused-age must be positive")
	}
	keys, err := seal.NewKeys(store, cur, old...)
	if err != nil {
		return session.KeepConfig{}, err
	}
	logger.Info("snapshots sealed under master key", "master_key_id", cur.ID(), "older_keys", len(old))
	return session.KeepConfig{
		Store: store, Keys: keys, Blobs: blobs,
		PauseDir:           filepath.Join(stateDir, "paused"),
		SnapshotQuotaBytes: o.SnapshotQuotaMiB << 20,
		MaxPausedAge:       o.MaxPausedAge,
	}, nil
}
