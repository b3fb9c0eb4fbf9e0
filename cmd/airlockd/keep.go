package main

import (
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/seal"
	"github.com/airlockhq/airlock/service/session"
)

// keepOptions configure snapshots, pause and fork, and the master key
// that seals snapshots.
type keepOptions struct {
	masterKeyFile    string
	oldMasterKeys    string
	snapshotQuotaMiB int64
	maxPausedAge     time.Duration
}

func (o *keepOptions) register(fs *flag.FlagSet) {
	fs.StringVar(&o.masterKeyFile, "master-key-file", envOr("AIRLOCK_MASTER_KEY_FILE", ""),
		"file holding the operator's master key (32 bytes as 64 hex digits or base64, mode 0600) that wraps every tenant's snapshot data key; "+
			"env AIRLOCK_MASTER_KEY_FILE, or the key itself in env AIRLOCK_MASTER_KEY. Without one, snapshots, pause and fork are off")
	fs.StringVar(&o.oldMasterKeys, "old-master-key-file", "",
		"comma-separated files of earlier master keys that still unwrap data keys not yet rotated (see 'airlock master-key rotate')")
	fs.Int64Var(&o.snapshotQuotaMiB, "snapshot-quota-mib", 10240, "sealed snapshot data one tenant may keep, in MiB")
	fs.DurationVar(&o.maxPausedAge, "max-paused-age", 7*24*time.Hour, "a session paused for longer is ended and its saved state removed")
}

// masterKeys reads the current master key (file or environment) and any
// older ones; nil when none is configured.
func (o keepOptions) masterKeys() (*seal.MasterKey, []*seal.MasterKey, error) {
	var cur *seal.MasterKey
	var err error
	switch env := os.Getenv("AIRLOCK_MASTER_KEY"); {
	case o.masterKeyFile != "" && env != "":
		return nil, nil, fmt.Errorf("give the master key in a file or in AIRLOCK_MASTER_KEY, not both")
	case o.masterKeyFile != "":
		cur, err = seal.LoadMasterKey(o.masterKeyFile)
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
	for _, p := range strings.Split(o.oldMasterKeys, ",") {
		if p = strings.TrimSpace(p); p == "" {
			continue
		}
		k, err := seal.LoadMasterKey(p)
		if err != nil {
			return nil, nil, err
		}
		old = append(old, k)
	}
	return cur, old, nil
}

// config is the session manager's keep config; empty (off) without a
// master key.
// keepStore is what the keep work records: snapshots and pauses, and the
// tenants' data keys.
type keepStore interface {
	airlock.KeepStore
	seal.KeyStore
}

func (o keepOptions) config(stateDir string, store keepStore, blobs airlock.Blobs, logger *slog.Logger) (session.KeepConfig, error) {
	cur, old, err := o.masterKeys()
	if err != nil {
		return session.KeepConfig{}, err
	}
	if cur == nil {
		logger.Info("no master key (--master-key-file or AIRLOCK_MASTER_KEY): snapshots, pause and fork are off")
		return session.KeepConfig{}, nil
	}
	if o.snapshotQuotaMiB <= 0 || o.maxPausedAge <= 0 {
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
		SnapshotQuotaBytes: o.snapshotQuotaMiB << 20,
		MaxPausedAge:       o.maxPausedAge,
	}, nil
}
