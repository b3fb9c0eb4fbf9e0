package gvisor

import (
	"fmt"
	"log/slog"
	"os/exec"
	"path/filepath"
	"time"
)

// Config configures the backend.
type Config struct {
	// Runsc is the runsc binary; default "runsc" from PATH.
	Runsc string
	// StateDir holds runsc's state (StateDir/runsc) and one run directory
	// per sandbox (StateDir/sandboxes/<id>).
	StateDir string
	// Platform is runsc's platform; default systrap.
	Platform string
	// CgroupParent is the cgroup every sandbox's cgroup lives under.
	CgroupParent string
	// AgentPath is the agent inside the image.
	AgentPath string
	// StartTimeout bounds sandbox start to the agent's hello.
	StartTimeout time.Duration
	// DebugLogs keeps runsc debug logs in each run directory (slow).
	DebugLogs bool
	// ExtraFlags are passed to runsc before the subcommand.
	ExtraFlags []string
	Logger     *slog.Logger
}

// Validate fills defaults and checks the config.
func (c *Config) Validate() error {
	if c.Runsc == "" {
		c.Runsc = "runsc"
	}
	p, err := exec.LookPath(c.Runsc)
	if err != nil {
		return fmt.Errorf("gvisor: runsc not found (%s): run the setup script, which installs it", c.Runsc)
	}
	c.Runsc = p
	if c.StateDir == "" || !filepath.IsAbs(c.StateDir) {
		return fmt.Errorf("gvisor: state dir must be an absolute path")
	}
	if c.Platform == "" {
		c.Platform = "systrap"
	}
	if c.CgroupParent == "" {
		c.CgroupParent = "airlock"
	}
	if c.AgentPath == "" {
		c.AgentPath = "/opt/airlock/bin/airlock-agent"
	}
	if c.StartTimeout == 0 {
		c.StartTimeout = 20 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return nil
}

func (c *Config) runscRoot() string    { return filepath.Join(c.StateDir, "runsc") }
func (c *Config) sandboxesDir() string { return filepath.Join(c.StateDir, "sandboxes") }

// Config returns the backend's configuration, defaults filled in.
func (b *Backend) Config() Config { return b.cfg }
