// Package teststack builds one node of the service in a test's process,
// real from end to end, with node.New (the assembly airlockd uses):
// SQLite on a temporary file, the built images, a gVisor backend of the
// test's own, the provisioner, the runner, the one-shot manager, the
// session manager and the HTTP API on a loopback port. Everything is torn down when the test ends, and the backend's
// own cleanup (testenv.GVisor) fails the test if anything of a sandbox is
// left on the host. Tests of several packages share it.
package teststack

import (
	"context"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/api/rest"
	"github.com/airlockhq/airlock/backend/gvisor"
	"github.com/airlockhq/airlock/blob/disk"
	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/internal/seal"
	"github.com/airlockhq/airlock/internal/testenv"
	"github.com/airlockhq/airlock/node"
	"github.com/airlockhq/airlock/service/image"
	"github.com/airlockhq/airlock/service/oneshot"
	"github.com/airlockhq/airlock/service/provision"
	"github.com/airlockhq/airlock/service/quota"
	"github.com/airlockhq/airlock/service/run"
	"github.com/airlockhq/airlock/service/session"
	"github.com/airlockhq/airlock/service/volume"
	"github.com/airlockhq/airlock/store/sqlite"
)

// Options shape a stack; the zero value is a cold node (no snapshots, no
// pool) with the default limits.
type Options struct {
	// NoRecover starts the node without taking back what an earlier run
	// left on its store and backend (sessions, sandboxes, networks,
	// interrupted runs), for a test that calls the recovery itself and
	// checks what it did.
	NoRecover bool
	// Backend is the default backend (nil: a fresh testenv.GVisor);
	// Extra are further backends.
	Backend *gvisor.Backend
	Extra   []airlock.Backend
	// Store is the store (nil: a fresh SQLite file).
	Store     *sqlite.DB
	Admission provision.Admission
	// Quotas, when set, are the tenants' default quotas: the stack keeps
	// them in a ledger on its store (Stack.Quotas), as airlockd does, and
	// serves GET /v1/usage. Nil leaves the provisioner's own ledger
	// (Admission.SessionsPerTenant sessions per tenant).
	Quotas quota.Limits
	// Ledger, when set, is the ledger of the tenants' quotas instead (one
	// the test made, e.g. to share it with its egress service); the test
	// starts and closes it.
	Ledger *quota.Ledger
	// Snapshots keeps base snapshots in SnapshotDir (a temporary one if
	// empty); Pool sizes the pool, which is off unless Pool.Max > 0 or
	// Warm names pairs.
	Snapshots   bool
	SnapshotDir string
	Pool        provision.PoolConfig
	// Warm are one-shot image/language pairs readied at start, and
	// WarmSessions session image/size pairs ("python-ds/small").
	Warm         []string
	WarmSessions []string
	// Egress and its log, and the tenants' default allow lists.
	Egress       airlock.Egress
	EgressLog    airlock.EgressStore
	NetworkAllow func(*airlock.Tenant) []string
	Limits       airlock.Limits
	MaxTimeout   time.Duration
	// Watchdog is the abuse monitor the runner reports to (nil: none);
	// Quarantines refuses quarantined tenants at admission (nil: none).
	Watchdog    airlock.Watchdog
	Quarantines provision.Quarantines
	// BlobDir is where blobs are kept; empty means a new temporary one
	// (a second stack on the store of a first shares the first's).
	BlobDir string
	// MasterKey seals snapshots; nil means a new one.
	MasterKey *seal.MasterKey
	// Session adjusts the session manager's config; REST the HTTP API's.
	Session func(*session.Config)
	REST    func(*rest.Config)
	// Node, if set, adjusts the node's config last (webhooks, keep).
	Node func(*node.Config)
	// NoServer leaves the HTTP API out.
	NoServer bool
	// WrapSessions, if set, wraps the session service the API serves (as
	// airlockd wraps it to let sessions be watched).
	WrapSessions func(airlock.SessionService) airlock.SessionService
	// Templates, when set, turns templates on with this configuration
	// and the test's agent (AIRLOCK_TEST_AGENT); nil leaves them off.
	Templates *node.TemplatesConfig
	// Serve, if set, returns what the loopback server serves, given the
	// API's handler (to mount more beside it, as airlockd does).
	Serve func(s *Stack, api http.Handler) http.Handler
}

// Stack is one node.
type Stack struct {
	Store       *sqlite.DB
	Blobs       *disk.Dir
	MasterKey   *seal.MasterKey // the snapshots' master key
	BlobDir     string
	Images      *image.Store
	Backend     *gvisor.Backend
	Provisioner *provision.Provisioner
	Quotas      *quota.Ledger // nil unless Options.Quotas or Ledger was set
	Runner      *run.Runner
	Manager     *oneshot.Manager
	Sessions    *session.Manager
	Volumes     *volume.Service
	SessionCfg  session.Config
	Registry    *prometheus.Registry
	API         http.Handler // the REST API's handler
	Node        *node.Node
	URL         string // empty with Options.NoServer
	Logger      *slog.Logger
}

// SmallSessions are session sizes quick to set up and tear down.
var SmallSessions = map[airlock.SessionSize]session.Size{
	airlock.SizeSmall: {CPUs: 1, MemoryBytes: 1 << 30, DiskBytes: 512 << 20, Pids: 256},
}

// New builds a stack, or skips when the machine lacks root, runsc or the
// images (and fails instead where testenv says everything must run). The
// stack is a node.New node in a temporary state directory, serving on a
// loopback port, with the parts Options give.
func New(t testing.TB, o Options) *Stack {
	t.Helper()
	testenv.RequireRoot(t)
	testenv.RequireRunsc(t)
	images := testenv.Images(t)
	for _, name := range []string{"base", "python-ds"} {
		testenv.Image(t, name)
	}
	s := &Stack{Backend: o.Backend, Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))}
	if s.Backend == nil {
		s.Backend = testenv.GVisor(t) // registered first: its clean-host check runs last
	}
	dir := t.TempDir()
	s.BlobDir = o.BlobDir
	if s.BlobDir == "" {
		s.BlobDir = filepath.Join(dir, "blobs")
	}
	s.MasterKey = o.MasterKey
	if s.MasterKey == nil {
		s.MasterKey, _ = seal.GenerateMasterKey()
	}
	cfg := o.config(s, dir)
	if o.Templates != nil {
		cfg.Templates, cfg.AgentPath = *o.Templates, testenv.Agent(t)
	}
	n, err := node.New(context.Background(), cfg, o.parts(s, images)...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- n.Run(ctx) }()
	// Stops admitting, ends the sessions and closes the node, before the
	// backend's clean check: sandboxes are destroyed and their destroy
	// times recorded in the store.
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("stop the node: %v", err)
		}
	})
	if !o.NoServer {
		s.URL = n.URL()
	}
	return s
}

// config is the node's Config for the options: a node of the defaults
// without the parts a test brings itself (egress proxy, abuse monitor,
// E2B routes), cold unless the options ask for snapshots or a pool.
func (o Options) config(s *Stack, dir string) node.Config {
	c := node.Defaults()
	c.StateDir, c.Listen, c.Logger = dir, "127.0.0.1:0", s.Logger
	c.KeepSessions = false
	c.Abuse.Off = true
	c.Egress.Disabled = true
	c.E2B.Enabled = false
	c.Blobs.Dir = s.BlobDir
	c.Templates.Disabled = true
	c.ImageGC = 0 // the images are shared with other tests
	c.Keep.MasterKey = s.MasterKey
	c.NoSnapshots = !o.Snapshots && o.SnapshotDir == ""
	c.SnapshotDir = o.SnapshotDir
	c.Pool = o.Pool
	if c.Pool.Max == 0 && len(o.Warm) == 0 && len(o.WarmSessions) == 0 {
		c.Pool.Disabled = true
	}
	c.Warm, c.Sessions.Warm = o.Warm, o.WarmSessions
	c.Sessions.Sizes = SmallSessions
	c.Sessions.Max = o.Admission.Sessions
	c.Sessions.MaxPerTenant = o.Admission.SessionsPerTenant
	if c.Sessions.MaxPerTenant == 0 {
		c.Sessions.MaxPerTenant = 8
	}
	c.MaxConcurrent, c.TenantShare, c.MaxQueue = o.Admission.OneShot, o.Admission.OneShotTenantShare, o.Admission.MaxQueue
	c.Quotas = node.QuotaConfig{Defaults: o.Quotas, Flush: time.Second, FlushGap: 100 * time.Millisecond}
	limits := o.Limits
	if limits == (airlock.Limits{}) {
		limits = airlock.DefaultLimits
	}
	c.DefaultTimeout, c.MemoryMiB = limits.Timeout, limits.MemoryBytes>>20
	if o.MaxTimeout > 0 {
		c.MaxTimeout = o.MaxTimeout
	}
	if o.Node != nil {
		o.Node(&c)
	}
	return c
}

// parts are the node's Options for the options: the test's backends, and
// whatever store, ledger, egress, watchdog and hooks it brought.
func (o Options) parts(s *Stack, images *image.Store) []node.Option {
	parts := []node.Option{
		node.WithImages(images),
		node.WithBackends(append([]airlock.Backend{s.Backend}, o.Extra...)...),
		node.WithoutDefaultTenant(),
	}
	if o.NoRecover {
		parts = append(parts, node.WithoutRecovery())
	}
	parts = append(parts,
		node.WithEgress(o.Egress, o.EgressLog, o.NetworkAllow),
		node.WithWatchdog(o.Watchdog),
		node.WithQuarantines(o.Quarantines),
		node.WithSessionConfig(func(c *session.Config) {
			c.ReapInterval = 200 * time.Millisecond
			if o.Session != nil {
				o.Session(c)
			}
			s.SessionCfg = *c
		}),
		node.WithRESTConfig(func(c *rest.Config) {
			if o.REST != nil {
				o.REST(c)
			}
		}),
		node.WithSessionService(func(svc airlock.SessionService) airlock.SessionService {
			if o.WrapSessions != nil {
				return o.WrapSessions(svc)
			}
			return svc
		}),
		node.WithFrontDoor(func(n *node.Node, api http.Handler) http.Handler {
			s.fill(n, o)
			s.API = api
			if o.Serve != nil {
				return o.Serve(s, api)
			}
			return api
		}),
	)
	if o.Store != nil {
		parts = append(parts, node.WithStore(o.Store))
	}
	if o.Ledger != nil {
		parts = append(parts, node.WithQuotas(o.Ledger))
	}
	return parts
}

// fill sets the stack's fields to the parts of n.
func (s *Stack) fill(n *node.Node, o Options) {
	s.Node, s.Images, s.Registry = n, n.Images, n.Registry
	s.Store, _ = n.Store.(*sqlite.DB)
	s.Blobs, _ = n.Blobs.(*disk.Dir)
	s.Provisioner, s.Runner, s.Manager, s.Sessions = n.Provisioner, n.Runner, n.OneShot, n.Sessions
	s.Volumes = n.Volumes
	if o.Ledger != nil || o.Quotas != nil {
		s.Quotas = n.Quotas
	}
}

// Tenant is a tenant of the stack with an API key and a client.
type Tenant struct {
	*airlock.Tenant
	Key    string
	Client *client.Client
}

// NewTenant creates a tenant and an API key for it.
func (s *Stack) NewTenant(t testing.TB, name string) Tenant {
	t.Helper()
	ctx := context.Background()
	tn := &airlock.Tenant{Name: name}
	if err := s.Store.CreateTenant(ctx, tn); err != nil {
		t.Fatal(err)
	}
	secret, key := airlock.NewAPIKey(tn.ID, "", time.Now())
	if err := s.Store.CreateAPIKey(ctx, key); err != nil {
		t.Fatal(err)
	}
	out := Tenant{Tenant: tn, Key: secret}
	if s.URL != "" {
		c, err := client.New(client.Config{BaseURL: s.URL, APIKey: secret})
		if err != nil {
			t.Fatal(err)
		}
		out.Client = c
	}
	return out
}
