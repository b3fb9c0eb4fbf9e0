package volume

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/seal"
)

// Config configures a Service.
type Config struct {
	Store airlock.VolumeStore
	// Dir holds the images (Dir/disks) and their host mounts (Dir/mnt).
	Dir string
	// Node is the fleet node this is ("" without a fleet); volumes made
	// here are held here, and only sessions here mount them.
	Node string
	// QuotaBytes returns the most the tenant's volumes may hold together
	// (-1: no limit); nil means no limit.
	QuotaBytes func(tenantID string) int64
	// UID and GID own a new volume's root directory: the sandbox user
	// (1000) unless set.
	UID, GID int
	// Snapshots seals volume snapshots; without Keys they are refused
	// (keep-unavailable), as workspace snapshots are.
	Snapshots SnapshotConfig
	Logger    *slog.Logger
	Now       func() time.Time
}

// SnapshotConfig is what volume snapshots need: the same keys, blob
// store and quota as workspace snapshots.
type SnapshotConfig struct {
	Keys  *seal.Keys    // the tenants' data keys
	Blobs airlock.Blobs // where sealed snapshots go
	// Used is what the tenant's snapshots (of workspaces and volumes)
	// hold now (airlock.KeepStore.SnapshotBytes); QuotaBytes the most
	// they may (0: 10 GiB).
	Used       func(ctx context.Context, tenantID string) (int64, error)
	QuotaBytes int64
}

// Validate checks the config and fills defaults.
func (c *Config) Validate() error {
	if c.Store == nil || c.Dir == "" {
		return fmt.Errorf("volume: a store and a directory are required")
	}
	if c.UID == 0 {
		c.UID = 1000
	}
	if c.GID == 0 {
		c.GID = c.UID
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Snapshots.Keys != nil {
		if c.Snapshots.Blobs == nil || c.Snapshots.Used == nil {
			return fmt.Errorf("volume: snapshots need a blob store and the snapshots' use")
		}
		if c.Snapshots.QuotaBytes == 0 {
			c.Snapshots.QuotaBytes = 10 << 30
		}
	}
	return nil
}
