package namespaces

import (
	"fmt"
	"log/slog"
	"path/filepath"
	"time"
)

// Config configures the backend.
type Config struct {
	// StateDir holds one run directory per sandbox
	// (StateDir/sandboxes/<id>) and the disk templates.
	StateDir string
	// CgroupParent is the cgroup every sandbox's cgroup lives under; it
	// must not be another backend's (the reconciler owns all of it).
	CgroupParent string
	// AgentPath is the agent inside the image; the init stage is the same
	// binary.
	AgentPath string
	// UIDBase and UIDCount are the host uids (and gids) given to
	// sandboxes, one per live sandbox: the sandbox user is mapped to it.
	// The range must be used by nothing else on the host.
	UIDBase  int
	UIDCount int
	// ReadyDisks is how many formatted, mounted disks are kept ready per
	// disk size, made in the background (default 2; negative for none).
	ReadyDisks int
	// Prestart is how many sandboxes are started ahead of time per image
	// (of the four used last): their init stage waits in its new
	// namespaces, under a host uid of its own, for the config of the
	// request that takes it (default 2; negative for none).
	Prestart int
	// StartTimeout bounds sandbox start to the agent's hello.
	StartTimeout time.Duration
	Logger       *slog.Logger
}

// Defaults of Config.
const (
	DefaultCgroupParent = "airlock-namespaces"
	DefaultUIDBase      = 0x7E000000 // 2113929216: above the ranges systemd gives containers
	DefaultUIDCount     = 65536
)

// Validate fills defaults and checks the config.
func (c *Config) Validate() error {
	if c.StateDir == "" || !filepath.IsAbs(c.StateDir) {
		return fmt.Errorf("namespaces: state dir must be an absolute path")
	}
	if c.CgroupParent == "" {
		c.CgroupParent = DefaultCgroupParent
	}
	if c.AgentPath == "" {
		c.AgentPath = "/opt/airlock/bin/airlock-agent"
	}
	if !filepath.IsAbs(c.AgentPath) {
		return fmt.Errorf("namespaces: agent path must be absolute")
	}
	if c.UIDBase == 0 {
		c.UIDBase = DefaultUIDBase
	}
	if c.UIDCount == 0 {
		c.UIDCount = DefaultUIDCount
	}
	if c.UIDBase < 65536 || c.UIDCount < 1 || int64(c.UIDBase)+int64(c.UIDCount) > 1<<32-2 {
		return fmt.Errorf("namespaces: uid range %d+%d is not usable (it must lie above 65535)", c.UIDBase, c.UIDCount)
	}
	if c.ReadyDisks == 0 {
		c.ReadyDisks = 2
	}
	if c.ReadyDisks < 0 {
		c.ReadyDisks = 0
	}
	if c.Prestart == 0 {
		c.Prestart = 2
	}
	if c.Prestart < 0 {
		c.Prestart = 0
	}
	if c.StartTimeout == 0 {
		c.StartTimeout = 20 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return nil
}

func (c *Config) sandboxesDir() string { return filepath.Join(c.StateDir, "sandboxes") }
func (c *Config) templatesDir() string { return filepath.Join(c.StateDir, "templates") }
func (c *Config) disksDir() string     { return filepath.Join(c.StateDir, "disks") }
func (c *Config) readyDir() string     { return filepath.Join(c.StateDir, "ready") }

// Config returns the backend's configuration, defaults filled in.
func (b *Backend) Config() Config { return b.cfg }
