package microvm

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/backend/microvm/vmm"
	"github.com/airlockhq/airlock/internal/guestabi"
)

// Config configures the backend.
type Config struct {
	// StateDir holds one machine directory per sandbox (StateDir/vms/<id>)
	// and the scratch disk templates.
	StateDir string
	// BuildGuest returns the guest artefacts of an image, building them
	// the first time (the image store's, service/image.GuestBuilder).
	BuildGuest func(ctx context.Context, img *airlock.Image) (*guestabi.Guest, error)
	// Driver starts the machines.
	Driver vmm.Driver
	// CgroupParent is where every VMM's cgroup lives; the backend owns
	// all of it.
	CgroupParent string
	// UIDBase and UIDCount are the host uids (and gids) the VMMs run as,
	// one per live sandbox, used by nothing else on the host.
	UIDBase  int
	UIDCount int
	// MemoryOverhead is the VMM's own memory on top of the guest's, in
	// its host cgroup.
	MemoryOverhead int64
	// StartTimeout bounds a boot to the agent's hello (minutes under TCG
	// on a busy host).
	StartTimeout time.Duration
	Logger       *slog.Logger
}

// Defaults of Config.
const (
	DefaultCgroupParent   = "airlock-microvm"
	DefaultUIDBase        = 0x7D000000 // below the namespaces backend's range
	DefaultUIDCount       = 65536
	DefaultMemoryOverhead = 256 << 20
)

// Validate fills defaults and checks the config.
func (c *Config) Validate() error {
	if c.StateDir == "" || !filepath.IsAbs(c.StateDir) {
		return fmt.Errorf("microvm: state dir must be an absolute path")
	}
	if c.BuildGuest == nil {
		return fmt.Errorf("microvm: no guest builder")
	}
	if c.Driver == nil {
		return fmt.Errorf("microvm: no VMM driver")
	}
	if c.CgroupParent == "" {
		c.CgroupParent = DefaultCgroupParent
	}
	if c.UIDBase == 0 {
		c.UIDBase = DefaultUIDBase
	}
	if c.UIDCount == 0 {
		c.UIDCount = DefaultUIDCount
	}
	if c.UIDBase < 65536 || c.UIDCount < 1 || int64(c.UIDBase)+int64(c.UIDCount) > 1<<32-2 {
		return fmt.Errorf("microvm: uid range %d+%d is not usable", c.UIDBase, c.UIDCount)
	}
	if c.MemoryOverhead == 0 {
		c.MemoryOverhead = DefaultMemoryOverhead
	}
	if c.StartTimeout == 0 {
		c.StartTimeout = 2 * time.Minute
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return nil
}

func (c *Config) vmsDir() string       { return filepath.Join(c.StateDir, "vms") }
func (c *Config) templatesDir() string { return filepath.Join(c.StateDir, "templates") }

// Config returns the backend's configuration, defaults filled in.
func (b *Backend) Config() Config { return b.cfg }
