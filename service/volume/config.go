package volume

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/airlockhq/airlock"
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
	Logger   *slog.Logger
	Now      func() time.Time
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
	return nil
}
