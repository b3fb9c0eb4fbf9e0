package node

import (
	"context"
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
// environment's AIRLOCK_MASTER_KEY, or made by Generate) they are off.
type KeepConfig struct {
	MasterKeyFile string
	// Generate, on a single node (a SQLite store, no fleet) given no
	// master key, uses <state-dir>/master.key, making it at the first
	// start: the embedded defaults then seal snapshots too. A fleet's
	// nodes must share one key, so they are always given theirs.
	Generate bool
	// OldMasterKeyFiles hold earlier master keys that still unwrap data
	// keys not yet rotated.
	OldMasterKeyFiles []string
	SnapshotQuotaMiB  int64
	MaxPausedAge      time.Duration
	// PausedQuotaMiB is what one tenant's paused sessions may hold on
	// disk (0: no quota).
	PausedQuotaMiB int64
	// MasterKey, when set, is the master key itself (MasterKeyFile and
	// the environment are not read; OldMasterKeyFiles are).
	MasterKey *seal.MasterKey
}

// masterKeys reads the current master key (file or environment) and any
// older ones; nil when none is configured.
func (o KeepConfig) masterKeys() (*seal.MasterKey, []*seal.MasterKey, error) {
	var cur *seal.MasterKey
	var err error
	switch env := os.Getenv("AIRLOCK_MASTER_KEY"); {
	case o.MasterKey != nil:
		cur = o.MasterKey
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
func (o KeepConfig) config(ctx context.Context, stateDir string, single bool, store keepStore, blobs airlock.Blobs, logger *slog.Logger) (session.KeepConfig, error) {
	cur, old, err := o.masterKeys()
	if err != nil {
		return session.KeepConfig{}, err
	}
	if cur == nil && o.Generate && single {
		if cur, err = localMasterKey(ctx, stateDir, store, logger); err != nil {
			return session.KeepConfig{}, err
		}
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
		PausedQuotaBytes:   max(o.PausedQuotaMiB, 0) << 20,
	}, nil
}

// MasterKeyFile is the name of the master key a single node makes in its
// state directory (KeepConfig.Generate).
const MasterKeyFile = "master.key"

// localMasterKey is the single node's own master key,
// <stateDir>/master.key, made (mode 0600) if there is none yet. It is
// not made when the store holds data keys wrapped under some other
// master key: those belong to a key the operator gave an earlier run and
// must give again; a new key would not open them. nil then, and
// snapshots stay off.
func localMasterKey(ctx context.Context, stateDir string, store seal.KeyStore, logger *slog.Logger) (*seal.MasterKey, error) {
	path := filepath.Join(stateDir, MasterKeyFile)
	if fileExists(path) {
		k, err := seal.LoadMasterKey(path)
		if err != nil {
			return nil, err
		}
		logger.Info("using this node's own master key; keep a copy of it apart from the node", "master_key_file", path)
		return k, nil
	}
	keys, err := store.TenantKeys(ctx)
	if err != nil {
		return nil, err
	}
	if len(keys) > 0 {
		logger.Warn("no master key given, and the store holds snapshot keys wrapped under one: give that key (--master-key-file); snapshots, pause and fork are off until then",
			"master_key_id", keys[0].MasterKeyID)
		return nil, nil
	}
	k, text := seal.GenerateMasterKey()
	if err := writeSecret(path, []byte(text+"\n")); err != nil {
		return nil, fmt.Errorf("writing a master key: %w", err)
	}
	logger.Warn("made a master key for snapshots, pause and fork: back it up apart from the node (without it, no sealed snapshot can be opened), or give airlockd your own with --master-key-file",
		"master_key_file", path, "master_key_id", k.ID())
	return k, nil
}
