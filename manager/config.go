package manager

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/airlockhq/airlock"
)

// Config configures a Manager.
type Config struct {
	// Backend is the node's default backend; the warm pool and the base
	// snapshots serve it. Backends are further backends a request reaches
	// by asking for their isolation, within its tenant's floor (see
	// airlock.ChooseBackend); they start their sandboxes fresh.
	Backend  airlock.Backend
	Backends []airlock.Backend

	Images airlock.ImageResolver
	Store  airlock.Store
	Blobs  airlock.Blobs

	// Limits of a one-shot execution; Timeout is the default wall time.
	Limits airlock.Limits
	// MaxTimeout is the most a request may ask for.
	MaxTimeout time.Duration
	// DefaultImages maps a language to the image used when the request
	// names none.
	DefaultImages map[airlock.Language]string
	// MaxConcurrent bounds executions running at once on this node; more
	// wait up to QueueTimeout for a slot, then get a 503 problem.
	MaxConcurrent int
	QueueTimeout  time.Duration
	// Artifact caps.
	MaxArtifacts      int
	MaxArtifactBytes  int64 // one file
	MaxArtifactsTotal int64 // all files of one execution

	// SnapshotDir holds the base snapshots; empty disables them (every
	// sandbox that is not from the pool boots cold).
	SnapshotDir string
	// Recipes say how each image and language is readied ahead of a
	// request; default DefaultRecipes().
	Recipes map[string]map[airlock.Language]Recipe
	// Pool sizes the warm pool.
	Pool PoolConfig
	// Metrics registers the manager's Prometheus series; nil keeps them
	// in a private registry.
	Metrics prometheus.Registerer
	// Egress gives executions with allow_network their network, under
	// the allow list NetworkAllow returns for the tenant (operator
	// config); nil Egress or an empty list refuses such executions.
	Egress       airlock.Egress
	NetworkAllow func(*airlock.Tenant) []string

	Logger *slog.Logger
	Now    func() time.Time
	NewID  func() string
}

// Validate fills defaults and checks the config.
func (c *Config) Validate() error {
	if c.Backend == nil || c.Images == nil || c.Store == nil || c.Blobs == nil {
		return fmt.Errorf("manager: backend, images, store and blobs are required")
	}
	for i, b := range c.Backends {
		if b == nil {
			return fmt.Errorf("manager: backend %d is nil", i)
		}
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
		c.DefaultImages = map[airlock.Language]string{
			airlock.Python: "python-ds",
			airlock.Bash:   "base",
			airlock.Node:   "base",
			airlock.SQL:    "base",
		}
	}
	if c.MaxConcurrent <= 0 {
		c.MaxConcurrent = 8
	}
	if c.QueueTimeout <= 0 {
		c.QueueTimeout = 30 * time.Second
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
	if c.Recipes == nil {
		c.Recipes = DefaultRecipes()
	}
	if c.Metrics == nil {
		c.Metrics = prometheus.NewRegistry()
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.NewID == nil {
		c.NewID = NewID
	}
	return nil
}

// NewID returns a random 128-bit ID in hex (airlock.NewID).
func NewID() string { return airlock.NewID() }
