package session

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/service/provision"
	"github.com/airlockhq/airlock/service/run"
)

// Size is what one session size gets.
type Size struct {
	CPUs        float64
	MemoryBytes int64
	DiskBytes   int64
	Pids        int64
}

// DefaultSizes are the operator defaults of the three sizes.
var DefaultSizes = map[airlock.SessionSize]Size{
	airlock.SizeSmall:  {CPUs: 1, MemoryBytes: 1 << 30, DiskBytes: 2 << 30, Pids: 256},
	airlock.SizeMedium: {CPUs: 2, MemoryBytes: 2 << 30, DiskBytes: 5 << 30, Pids: 512},
	airlock.SizeLarge:  {CPUs: 4, MemoryBytes: 4 << 30, DiskBytes: 10 << 30, Pids: 1024},
}

// Volumes claims and mounts the tenants' volumes for sessions (package
// volume implements it).
type Volumes interface {
	// Attach claims the volumes for the session and returns what its
	// sandbox is to bind; on error nothing is claimed.
	Attach(ctx context.Context, tenantID, sessionID string, reqs []airlock.VolumeMount) ([]airlock.SandboxVolume, error)
	// Detach releases the session's volumes once its sandbox is gone.
	Detach(ctx context.Context, sessionID string) error
	// Claims returns what each session of the node has mounted.
	Claims(ctx context.Context) (map[string][]airlock.VolumeMount, error)
	// Recover releases the claims of sessions that are not live.
	Recover(ctx context.Context, live func(sessionID string) bool) error
}

// Config configures a Manager.
type Config struct {
	// Provisioner gives sessions their sandboxes (backend within the
	// tenant's floor, admission, pool, snapshots, network) and takes them
	// back; Runner runs and records their execs and cells.
	Provisioner *provision.Provisioner
	Runner      *run.Runner
	Images      airlock.ImageResolver
	// Templates resolves "template" of a request; nil refuses every
	// template (not found). Images must then resolve the names of
	// templates' images too (template.Service.Images), for restarts and
	// forks.
	Templates airlock.TemplateResolver
	// SessionTemplates makes templates from sessions (POST
	// /v1/sessions/{id}/template); nil answers 501.
	SessionTemplates SessionTemplates
	Store            airlock.Store        // tenants; executions of sessions are recorded through Runner
	Sessions         airlock.SessionStore // session records and idempotency keys
	// Egress gives sessions with an allow list or broker scopes their
	// network, and EgressLog is where it writes its audit log; without
	// them such sessions are refused (network-unavailable).
	Egress    airlock.Egress
	EgressLog airlock.EgressStore

	// Sizes maps each size to its limits; DefaultSizes fill the gaps.
	Sizes        map[airlock.SessionSize]Size
	DefaultSize  airlock.SessionSize // small if empty
	DefaultImage string              // python-ds if empty

	// DefaultTimeout is a session's lifetime when the request names none
	// (10 minutes); MaxLifetime is the most any session of any tenant may
	// live from its creation, extensions included (12 hours).
	DefaultTimeout time.Duration
	MaxLifetime    time.Duration
	// IdleTimeout ends a session nothing ran in for that long (10 minutes);
	// a request may ask for less, or more up to MaxLifetime.
	IdleTimeout time.Duration
	// ExecTimeout is an exec's or a cell's wall time when the request
	// names none (60 s); MaxExecTimeout the most it may ask for (1 hour).
	ExecTimeout    time.Duration
	MaxExecTimeout time.Duration
	// OutputBytes caps each stream of one exec or cell (1 MiB).
	OutputBytes int64
	// MaxUploads is how many file uploads one session takes at once (4);
	// one more is refused with 429 too-many-uploads and a Retry-After.
	MaxUploads int
	// ProcessMemory is the share of a session's memory one process may
	// address (RLIMIT_AS); 0.75 if zero. The rest is headroom for the
	// sandbox's own kernel, other processes and page cache, so that one
	// greedy command fails alone instead of the cgroup killing the session.
	ProcessMemory float64

	// CreateTimeout bounds making a sandbox (2 minutes); a retry with the
	// same idempotency key waits up to this for the first request.
	CreateTimeout time.Duration
	// IdempotencyTTL is how long an idempotency key holds (24 hours).
	IdempotencyTTL time.Duration
	// ReapInterval is how often the reaper looks for expired and idle
	// sessions (5 s).
	ReapInterval time.Duration

	// Metrics keeps the sessions' resource samples; without it sessions
	// are not sampled and GET .../metrics is refused (metrics-unavailable).
	// SampleInterval is how often each running session is sampled (5 s);
	// SampleRetention how long samples are kept after their session ends
	// (24 hours).
	Metrics         airlock.SessionMetricsStore
	SampleInterval  time.Duration
	SampleRetention time.Duration
	// Volumes mounts the tenants' volumes into sessions that ask for
	// them (package volume); without it such sessions are refused
	// (volumes-unavailable).
	Volumes Volumes

	// Keep turns on snapshots, pause and resume, and fork (keep.go);
	// without a Store they are refused (keep-unavailable).
	Keep KeepConfig
	// Events takes the session's lifecycle events (events.go); nil
	// records none.
	Events airlock.EventSink

	Logger *slog.Logger
	Now    func() time.Time
	NewID  func() string
}

// Validate fills defaults and checks the config.
func (c *Config) Validate() error {
	if c.Provisioner == nil || c.Runner == nil || c.Images == nil || c.Store == nil || c.Sessions == nil {
		return fmt.Errorf("session: provisioner, runner, images, store and session store are required")
	}
	sizes := map[airlock.SessionSize]Size{}
	for k, v := range DefaultSizes {
		sizes[k] = v
	}
	for k, v := range c.Sizes {
		if !k.Valid() {
			return fmt.Errorf("session: unknown size %q", k)
		}
		if v.CPUs <= 0 || v.MemoryBytes < 64<<20 || v.DiskBytes < 16<<20 || v.Pids <= 0 {
			return fmt.Errorf("session: size %s needs CPUs, at least 64 MiB of memory, 16 MiB of disk and a process limit", k)
		}
		sizes[k] = v
	}
	c.Sizes = sizes
	if c.DefaultSize == "" {
		c.DefaultSize = airlock.SizeSmall
	}
	if !c.DefaultSize.Valid() {
		return fmt.Errorf("session: unknown default size %q", c.DefaultSize)
	}
	if c.DefaultImage == "" {
		c.DefaultImage = "python-ds"
	}
	defaults := []struct {
		d   *time.Duration
		def time.Duration
	}{
		{&c.DefaultTimeout, 10 * time.Minute},
		{&c.MaxLifetime, 12 * time.Hour},
		{&c.IdleTimeout, 10 * time.Minute},
		{&c.ExecTimeout, time.Minute},
		{&c.MaxExecTimeout, time.Hour},
		{&c.CreateTimeout, 2 * time.Minute},
		{&c.IdempotencyTTL, 24 * time.Hour},
		{&c.ReapInterval, 5 * time.Second},
		{&c.SampleInterval, 5 * time.Second},
		{&c.SampleRetention, 24 * time.Hour},
	}
	for _, d := range defaults {
		if *d.d < 0 {
			return fmt.Errorf("session: durations must not be negative")
		}
		if *d.d == 0 {
			*d.d = d.def
		}
	}
	if c.DefaultTimeout > c.MaxLifetime {
		return fmt.Errorf("session: default timeout %s exceeds the maximum lifetime %s", c.DefaultTimeout, c.MaxLifetime)
	}
	if c.ExecTimeout > c.MaxExecTimeout {
		return fmt.Errorf("session: default exec timeout %s exceeds the maximum %s", c.ExecTimeout, c.MaxExecTimeout)
	}
	if c.DefaultTimeout < time.Second || c.ExecTimeout < time.Second || c.IdleTimeout < time.Second {
		return fmt.Errorf("session: timeouts must be at least a second")
	}
	if c.OutputBytes <= 0 {
		c.OutputBytes = 1 << 20
	}
	if c.MaxUploads < 0 {
		return fmt.Errorf("session: MaxUploads must not be negative")
	}
	if c.MaxUploads == 0 {
		c.MaxUploads = 4
	}
	if c.ProcessMemory == 0 {
		c.ProcessMemory = 0.75
	}
	if c.ProcessMemory <= 0 || c.ProcessMemory > 1 {
		return fmt.Errorf("session: process memory share must be in (0, 1]")
	}
	if err := c.Keep.validate(); err != nil {
		return err
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.NewID == nil {
		c.NewID = airlock.NewID
	}
	return nil
}
