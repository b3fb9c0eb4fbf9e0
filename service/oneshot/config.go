package oneshot

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/service/provision"
	"github.com/airlockhq/airlock/service/run"
)

// Config configures a Manager.
type Config struct {
	Provisioner *provision.Provisioner
	Runner      *run.Runner
	Images      airlock.ImageResolver
	// Templates resolves "template" of a request; nil refuses every
	// template (not found).
	Templates airlock.TemplateResolver
	Store     airlock.Store
	Blobs     airlock.Blobs

	// Limits of a one-shot execution; Timeout is the default wall time.
	Limits airlock.Limits
	// MaxTimeout is the most a request may ask for.
	MaxTimeout time.Duration
	// DefaultImages maps a language to the image used when the request
	// names none.
	DefaultImages map[airlock.Language]string
	// Artifact caps.
	MaxArtifacts      int
	MaxArtifactBytes  int64 // one file
	MaxArtifactsTotal int64 // all files of one execution

	// NetworkAllow returns the tenant's default allow list for
	// executions with allow_network (operator config); nil or an empty
	// list refuses such executions.
	NetworkAllow func(*airlock.Tenant) []string

	Logger *slog.Logger
	NewID  func() string
}

// Validate fills defaults and checks the config.
func (c *Config) Validate() error {
	if c.Provisioner == nil || c.Runner == nil || c.Images == nil || c.Store == nil || c.Blobs == nil {
		return fmt.Errorf("manager: provisioner, runner, images, store and blobs are required")
	}
	if c.Limits == (airlock.Limits{}) {
		c.Limits = airlock.DefaultLimits
	}
	if c.MaxTimeout == 0 {
		c.MaxTimeout = 5 * time.Minute
	}
	if c.Limits.Timeout > c.MaxTimeout {
		return fmt.Errorf("manager: default timeout %s exceeds the maximum %s", c.Limits.Timeout, c.MaxTimeout)
	}
	if c.DefaultImages == nil {
		c.DefaultImages = DefaultImages()
	}
	if c.MaxArtifacts <= 0 {
		c.MaxArtifacts = 64
	}
	if c.MaxArtifactBytes <= 0 {
		c.MaxArtifactBytes = 100 << 20
	}
	if c.MaxArtifactsTotal <= 0 {
		c.MaxArtifactsTotal = 256 << 20
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.NewID == nil {
		c.NewID = airlock.NewID
	}
	return nil
}

// DefaultImages are the images of the languages when a request names
// none.
func DefaultImages() map[airlock.Language]string {
	return map[airlock.Language]string{
		airlock.Python: "python-ds",
		airlock.Bash:   "base",
		airlock.Node:   "base",
		airlock.SQL:    "base",
	}
}
