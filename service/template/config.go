package template

import (
	"errors"
	"log/slog"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/secretscan"
)

// Defaults of Config.
const (
	DefaultMaxContextBytes = 1 << 30
	DefaultMaxBytes        = 4 << 30
	DefaultMaxFiles        = 500_000
	DefaultQuotaBytes      = 10 << 30
	DefaultConcurrent      = 2
)

// Config configures a Service.
type Config struct {
	// StateDir is the node's state directory; templates live in
	// StateDir/templates.
	StateDir string
	// Store records templates.
	Store airlock.TemplateStore
	// AgentPath is the static agent installed into every template.
	AgentPath string
	// Secrets scans every template before it is published; nil is
	// secretscan.Default().
	Secrets *secretscan.Scanner
	// Builders build a source kind each. The OCI import (NewOCIBuilder)
	// serves TemplateFromImage and TemplateFromArchive.
	Builders map[airlock.TemplateSource]Builder
	// Validators check a request of a source kind before it is
	// recorded (the Dockerfile builder parses the Dockerfile): an error
	// is the answer to POST /v1/templates, and nothing is recorded.
	Validators map[airlock.TemplateSource]func(*airlock.CreateTemplateRequest) error
	// MaxContextBytes bounds an uploaded context.
	MaxContextBytes int64
	// MaxBytes and MaxFiles bound one template's rootfs.
	MaxBytes int64
	MaxFiles int64
	// QuotaBytes bounds the templates of one tenant together (the
	// operator's are not counted); a build that would go over it fails.
	// Negative: no quota.
	QuotaBytes int64
	// Concurrent bounds the builds running at once on the node; others
	// wait (their status stays building).
	Concurrent int
	// Blobs is the fleet's shared object store (nil: templates stay on
	// the node that built them). Every template published is uploaded to
	// it, and a template this node does not hold is pulled from it
	// (objects.go).
	Blobs airlock.Blobs
	// OnPull, if set, is told of every pull from Blobs that ended.
	OnPull PullFunc
	// Forget, if set, is called with a deleted template's image name
	// (airlock.Template.ImageName): the node drops what it keeps ready
	// of it (pool members, base snapshots).
	Forget func(image string)
	Logger *slog.Logger
}

// Validate checks c.
func (c *Config) Validate() error {
	switch {
	case c.StateDir == "":
		return errors.New("template service: no state directory")
	case c.Store == nil:
		return errors.New("template service: no store")
	case c.AgentPath == "":
		return errors.New("template service: no agent binary")
	case c.MaxContextBytes < 0 || c.MaxBytes < 0 || c.MaxFiles < 0 || c.Concurrent < 0:
		return errors.New("template service: limits must not be negative")
	}
	return nil
}

func (c *Config) defaults() {
	if c.MaxContextBytes == 0 {
		c.MaxContextBytes = DefaultMaxContextBytes
	}
	if c.MaxBytes == 0 {
		c.MaxBytes = DefaultMaxBytes
	}
	if c.MaxFiles == 0 {
		c.MaxFiles = DefaultMaxFiles
	}
	if c.QuotaBytes == 0 {
		c.QuotaBytes = DefaultQuotaBytes
	}
	if c.Concurrent == 0 {
		c.Concurrent = DefaultConcurrent
	}
	if c.Secrets == nil {
		c.Secrets = secretscan.Default()
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
}
