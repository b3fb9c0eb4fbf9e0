// Package teststack builds one node of the service in a test's process,
// real from end to end: SQLite on a temporary file, the built images, a
// gVisor backend of the test's own, the provisioner, the runner, the
// one-shot manager, the session manager and the HTTP API on a loopback
// server. Everything is torn down when the test ends, and the backend's
// own cleanup (testenv.GVisor) fails the test if anything of a sandbox is
// left on the host. Tests of several packages share it.
package teststack

import (
	"context"
	"crypto/rand"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
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
	"github.com/airlockhq/airlock/service/image"
	"github.com/airlockhq/airlock/service/oneshot"
	"github.com/airlockhq/airlock/service/provision"
	"github.com/airlockhq/airlock/service/quota"
	"github.com/airlockhq/airlock/service/run"
	"github.com/airlockhq/airlock/service/session"
	"github.com/airlockhq/airlock/store/sqlite"
)

// Options shape a stack; the zero value is a cold node (no snapshots, no
// pool) with the default limits.
type Options struct {
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
	// NoServer leaves the HTTP API out.
	NoServer bool
	// WrapSessions, if set, wraps the session service the API serves (as
	// airlockd wraps it to let sessions be watched).
	WrapSessions func(airlock.SessionService) airlock.SessionService
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
	SessionCfg  session.Config
	Registry    *prometheus.Registry
	API         http.Handler // the REST API's handler
	Server      *httptest.Server
	URL         string
	Logger      *slog.Logger
}

// SmallSessions are session sizes quick to set up and tear down.
var SmallSessions = map[airlock.SessionSize]session.Size{
	airlock.SizeSmall: {CPUs: 1, MemoryBytes: 1 << 30, DiskBytes: 512 << 20, Pids: 256},
}

// New builds a stack, or skips when the machine lacks root, runsc or the
// images (and fails instead where testenv says everything must run).
func New(t testing.TB, o Options) *Stack {
	t.Helper()
	testenv.RequireRoot(t)
	testenv.RequireRunsc(t)
	images := testenv.Images(t)
	for _, name := range []string{"base", "python-ds"} {
		testenv.Image(t, name)
	}
	s := &Stack{Images: images, Backend: o.Backend, Store: o.Store, Registry: prometheus.NewRegistry()}
	if s.Backend == nil {
		s.Backend = testenv.GVisor(t) // registered first: its clean-host check runs last
	}
	s.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	ctx := context.Background()
	dir := t.TempDir()
	var err error
	if s.Store == nil {
		s.Store, err = sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(dir, "airlock.db")})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Store.Close() })
	}
	s.BlobDir = o.BlobDir
	if s.BlobDir == "" {
		s.BlobDir = filepath.Join(dir, "blobs")
	}
	s.Blobs, err = disk.New(disk.Config{Dir: s.BlobDir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Blobs.Close() })
	snapDir := ""
	if o.Snapshots || o.SnapshotDir != "" {
		snapDir = o.SnapshotDir
		if snapDir == "" {
			snapDir = filepath.Join(dir, "snapshots")
		}
	}
	pool := o.Pool
	if pool.Max == 0 && len(o.Warm) == 0 && len(o.WarmSessions) == 0 {
		pool.Disabled = true
	}
	var quotas provision.Quotas
	if o.Ledger != nil {
		s.Quotas, quotas = o.Ledger, o.Ledger
	} else if o.Quotas != nil {
		s.Quotas, err = quota.New(quota.Config{Defaults: o.Quotas, Store: s.Store, FlushInterval: time.Second, FlushGap: 100 * time.Millisecond, Metrics: s.Registry, Logger: s.Logger})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Quotas.Start(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { // after the sessions and the provisioner (cleanups run last first)
			if err := s.Quotas.Close(context.Background()); err != nil {
				t.Errorf("close the quotas: %v", err)
			}
		})
		quotas = s.Quotas
	}
	s.Provisioner, err = provision.New(provision.Config{
		Backends:    append([]airlock.Backend{s.Backend}, o.Extra...),
		Admission:   o.Admission,
		Quotas:      quotas,
		SnapshotDir: snapDir,
		Pool:        pool,
		Egress:      o.Egress,
		Quarantines: o.Quarantines,
		Metrics:     s.Registry,
		Logger:      s.Logger,
	})
	if err != nil {
		t.Fatal(err)
	}
	s.Runner, err = run.New(run.Config{Store: s.Store, Metrics: s.Registry, Watchdog: o.Watchdog, Logger: s.Logger})
	if err != nil {
		t.Fatal(err)
	}
	limits := o.Limits
	if limits == (airlock.Limits{}) {
		limits = airlock.DefaultLimits
	}
	s.Manager, err = oneshot.New(oneshot.Config{
		Provisioner: s.Provisioner, Runner: s.Runner, Images: images, Store: s.Store, Blobs: s.Blobs,
		Limits: limits, MaxTimeout: o.MaxTimeout, NetworkAllow: o.NetworkAllow, Logger: s.Logger,
	})
	if err != nil {
		t.Fatal(err)
	}
	// Snapshots, pause and fork, under a master key of the test's.
	s.MasterKey = o.MasterKey
	if s.MasterKey == nil {
		s.MasterKey, _ = seal.GenerateMasterKey()
	}
	keys, err := seal.NewKeys(s.Store, s.MasterKey)
	if err != nil {
		t.Fatal(err)
	}
	s.SessionCfg = session.Config{
		Provisioner: s.Provisioner, Runner: s.Runner, Images: images, Store: s.Store, Sessions: s.Store,
		Egress: o.Egress, EgressLog: o.EgressLog, Sizes: SmallSessions, ReapInterval: 200 * time.Millisecond,
		Logger: s.Logger,
		Keep:   session.KeepConfig{Store: s.Store, Keys: keys, Blobs: s.Blobs, PauseDir: filepath.Join(dir, "paused")},
	}
	if o.Session != nil {
		o.Session(&s.SessionCfg)
	}
	s.Sessions, err = session.New(s.SessionCfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Manager.Warm(ctx, o.Warm); err != nil {
		t.Fatal(err)
	}
	for _, w := range o.WarmSessions {
		name, size, _ := strings.Cut(w, "/")
		if err := s.Sessions.Warm(ctx, name, airlock.SessionSize(size)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Provisioner.Start(ctx); err != nil {
		t.Fatal(err)
	}
	// Runs before the store closes and before the backend's clean check:
	// sandboxes are destroyed in the background and their destroy times
	// recorded in the store.
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := s.Provisioner.Close(ctx); err != nil {
			t.Errorf("close the provisioner: %v", err)
		}
	})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := s.Sessions.Close(ctx); err != nil {
			t.Errorf("close the sessions: %v", err)
		}
	})
	if o.NoServer {
		return s
	}
	key := make([]byte, 32)
	rand.Read(key)
	var sessions airlock.SessionService = s.Sessions
	if o.WrapSessions != nil {
		sessions = o.WrapSessions(sessions)
	}
	cfg := rest.Config{
		Store: s.Store, Events: s.Store, Blobs: s.Blobs, Executor: s.Manager, Sessions: sessions,
		SigningKey: key, MaxTimeout: o.MaxTimeout, Logger: s.Logger,
	}
	if s.Quotas != nil {
		cfg.Usage = s.Quotas
	}
	if o.REST != nil {
		o.REST(&cfg)
	}
	api, err := rest.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s.API = api.Handler()
	root := s.API
	if o.Serve != nil {
		root = o.Serve(s, s.API)
	}
	s.Server = httptest.NewServer(root)
	t.Cleanup(s.Server.Close)
	s.URL = s.Server.URL
	return s
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
