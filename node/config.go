package node

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/api/rest"
	"github.com/airlockhq/airlock/fleet"
	"github.com/airlockhq/airlock/service/preview"
	"github.com/airlockhq/airlock/service/provision"
	"github.com/airlockhq/airlock/service/quota"
	"github.com/airlockhq/airlock/service/session"
	"github.com/airlockhq/airlock/store/postgres"
)

// ErrConfig is wrapped by every error of Config.Validate.
var ErrConfig = errors.New("node: bad config")

// configError is an error of Validate: its message is the problem alone
// (airlockd prints it as it is), and it is an ErrConfig.
type configError struct{ err error }

func (e configError) Error() string           { return e.err.Error() }
func (e configError) Unwrap() []error         { return []error{ErrConfig, e.err} }
func badConfig(format string, a ...any) error { return configError{fmt.Errorf(format, a...)} }

// Config is everything one node is made of. airlockd fills it from its
// flags; tests fill it directly. Start from Defaults.
type Config struct {
	// Listen is the API's address ("127.0.0.1:0" for any free port).
	Listen string
	// StateDir holds the database, blobs, images and sandboxes.
	StateDir string
	// AgentPath is the airlock-agent binary the images must carry
	// (empty: next to the running binary, if present).
	AgentPath string
	// Logger is the node's logger (nil: slog.Default()).
	Logger *slog.Logger

	MaxTimeout     time.Duration // longest wall time a request may ask for
	DefaultTimeout time.Duration // wall time when a request names none
	MemoryMiB      int64         // memory limit of a one-shot sandbox
	MaxConcurrent  int           // one-shot executions at once
	TenantShare    float64       // share of the one-shot slots one tenant may hold
	MaxQueue       int           // one-shot executions that may wait (0: 4 x MaxConcurrent)
	MaxStarts      int           // sandboxes being made at once (0: the CPUs)
	// KeepSessions leaves live sessions running at shutdown for the next
	// start to reattach; false ends them.
	KeepSessions bool
	CgroupParent string // host cgroup of every gVisor sandbox
	Namespaces   bool   // also offer the namespaces backend
	MicroVM      bool   // also offer the microVM backend
	NoSnapshots  bool   // never restore from base snapshots
	// BuildImages builds, in the background once the node serves, each
	// shipped image not built for the node's agent (see imagebuild.go).
	BuildImages bool
	// SnapshotDir keeps the base snapshots (default: <state-dir>/snapshots).
	SnapshotDir string
	// Pool sizes the warm pool (Disabled: no pool).
	Pool provision.PoolConfig
	// Warm are the one-shot image/language pairs readied at start.
	Warm []string
	// ImageGC is how often the node removes image versions, template
	// leftovers and layers nothing references (also once at start); 0
	// never (see gc.go).
	ImageGC time.Duration
	// DebugListen serves Go's profiles there; off when empty. Beyond
	// loopback only with API.MetricsKey, which every request must carry.
	DebugListen string

	Sessions SessionsConfig
	Egress   EgressConfig
	API      APIConfig
	Preview  PreviewConfig
	E2B      E2BConfig
	Quotas   QuotaConfig
	Abuse    AbuseConfig
	Keep     KeepConfig
	Webhooks WebhookConfig
	Blobs    BlobConfig
	Trace    TraceConfig
	Store    StoreConfig
	Fleet    FleetConfig
	// Templates configures templates from OCI images (and the builders
	// other sources plug in).
	Templates TemplatesConfig
}

// SessionsConfig are the session settings.
type SessionsConfig struct {
	Sizes          map[airlock.SessionSize]session.Size
	Timeout        time.Duration
	MaxLifetime    time.Duration
	IdleTimeout    time.Duration
	ExecTimeout    time.Duration
	MaxExecTimeout time.Duration
	Max            int // live sessions on this node
	MaxPerTenant   int // default of the sessions quota
	// SampleInterval is how often each running session's resource use
	// is sampled (GET /v1/sessions/{id}/metrics).
	SampleInterval time.Duration
	// Warm are the image/size pairs whose sessions are readied ahead.
	Warm []string
}

// APIConfig are the settings of the HTTP API.
type APIConfig struct {
	PublicURL  string
	MetricsKey string
}

// PreviewConfig are the settings of preview URLs (service/preview).
type PreviewConfig struct {
	// Domain turns on Host routing, {port}-{session_id}.Domain; the
	// path form /v1/sessions/{id}/ports/{port}/ works without it.
	Domain string
	// MaxConns bounds the preview requests open at once to one session.
	MaxConns int
	// MaxMiB bounds the MiB one session's previews carry, both ways, over
	// its life; 0 for no limit.
	MaxMiB int64
}

// Defaults is the configuration airlockd's flags default to.
func Defaults() Config {
	return Config{
		Listen:         "127.0.0.1:8080",
		StateDir:       "/var/lib/airlock",
		MaxTimeout:     5 * time.Minute,
		DefaultTimeout: airlock.DefaultLimits.Timeout,
		MemoryMiB:      airlock.DefaultLimits.MemoryBytes >> 20,
		MaxConcurrent:  8,
		TenantShare:    0.75,
		KeepSessions:   true,
		Preview:        PreviewConfig{MaxConns: preview.DefaultMaxConns, MaxMiB: preview.DefaultMaxBytes >> 20},
		CgroupParent:   "airlock",
		Pool:           provision.PoolConfig{Min: 1, Max: 8, MemoryBudget: 2048 << 20, MaxAge: 10 * time.Minute, TemplateMax: 4, TemplateIdle: 5 * time.Minute},
		ImageGC:        time.Hour,
		Warm:           []string{"python-ds/python", "base/bash", "base/node", "base/sql"},
		Sessions: SessionsConfig{
			Sizes:          map[airlock.SessionSize]session.Size{},
			Timeout:        10 * time.Minute,
			MaxLifetime:    12 * time.Hour,
			IdleTimeout:    10 * time.Minute,
			ExecTimeout:    time.Minute,
			MaxExecTimeout: time.Hour,
			Max:            32,
			MaxPerTenant:   8,
			SampleInterval: 5 * time.Second,
			Warm:           []string{"python-ds/small"},
		},
		Egress: EgressConfig{QuotaMiB: 1024, Allow: map[string][]string{}},
		E2B:    E2BConfig{Enabled: true, Templates: map[string]string{}},
		Quotas: QuotaConfig{Defaults: quota.Limits{}},
		Abuse: AbuseConfig{
			Response:    "kill",
			Interval:    time.Second,
			MiningWin:   45 * time.Second,
			CPUFraction: 0.75,
			ScanWin:     10 * time.Second,
			ScanDistict: 20,
			ForkWin:     10 * time.Second,
			ForkHits:    3,
			ForkBurst:   0.5,
			DNSWin:      30 * time.Second,
			DNSFlagged:  10,
		},
		Keep:     KeepConfig{SnapshotQuotaMiB: 10240, MaxPausedAge: 7 * 24 * time.Hour, PausedQuotaMiB: 20480, Generate: true},
		Webhooks: WebhookConfig{MaxPerTenant: 10, Horizon: 24 * time.Hour, EventsRetention: 7 * 24 * time.Hour},
		Store:    StoreConfig{URL: "sqlite"},
		Fleet:    FleetConfig{LeaseTTL: fleet.DefaultLeaseTTL, K: fleet.DefaultK, Prefix: fleet.DefaultPrefix},
	}
}

// Validate checks the settings that can be checked before anything
// starts, so a bad value stops airlockd before it touches the host. Its
// messages name airlockd's flags.
func (c *Config) Validate() error {
	if c.StateDir == "" {
		return badConfig("no state directory")
	}
	if c.Preview.Domain != "" {
		if err := preview.ValidDomain(c.Preview.Domain); err != nil {
			return badConfig("--preview-domain: %v", err)
		}
	}
	if c.Preview.MaxConns < 0 || c.Preview.MaxMiB < 0 {
		return badConfig("--preview-max-conns and --preview-max-mib must not be negative")
	}
	if c.Listen == "" {
		return badConfig("no listen address")
	}
	if c.API.PublicURL != "" {
		if _, err := rest.ParsePublicURL(c.API.PublicURL); err != nil {
			return badConfig("--public-url: %w", err)
		}
	}
	if c.API.MetricsKey != "" {
		if err := rest.ValidateMetricsKey(c.API.MetricsKey); err != nil {
			return badConfig("--metrics-key: %w", err)
		}
	}
	if err := c.Store.validate(); err != nil {
		return configError{err}
	}
	if err := c.Fleet.validate(c.Listen); err != nil {
		return configError{err}
	}
	return nil
}

// withDefaults fills what is derived from the machine: the fleet's node
// name and address (its capacity bounds nothing unless given).
func (c Config) withDefaults() Config {
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Fleet.enabled() {
		if c.Fleet.NodeID == "" {
			c.Fleet.NodeID, _ = os.Hostname()
		}
		if c.Fleet.Advertise == "" {
			host, port, _ := net.SplitHostPort(c.Listen)
			if host == "" || host == "0.0.0.0" || host == "::" {
				host, _ = os.Hostname()
			}
			c.Fleet.Advertise = "http://" + net.JoinHostPort(host, port)
		}
	}
	return c
}

func (c StoreConfig) validate() error {
	if c.URL == "" || c.URL == "sqlite" {
		return nil
	}
	if !c.postgres() {
		return fmt.Errorf(`--store: want "sqlite" or a postgres:// URL, not %q`, redact(c.URL))
	}
	if err := (postgres.Config{DSN: c.URL}).Validate(); err != nil {
		return fmt.Errorf("--store: %v", airlock.ErrorMessage(err))
	}
	return nil
}
