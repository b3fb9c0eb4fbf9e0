package node

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/api/e2b"
	"github.com/airlockhq/airlock/api/rest"
	"github.com/airlockhq/airlock/backend/gvisor"
	"github.com/airlockhq/airlock/fleet"
	"github.com/airlockhq/airlock/internal/secretscan"
	"github.com/airlockhq/airlock/service/abuse"
	"github.com/airlockhq/airlock/service/egress"
	"github.com/airlockhq/airlock/service/image"
	"github.com/airlockhq/airlock/service/oneshot"
	"github.com/airlockhq/airlock/service/preview"
	"github.com/airlockhq/airlock/service/provision"
	"github.com/airlockhq/airlock/service/quota"
	"github.com/airlockhq/airlock/service/run"
	"github.com/airlockhq/airlock/service/session"
	"github.com/airlockhq/airlock/service/template"
	"github.com/airlockhq/airlock/service/volume"
	"github.com/airlockhq/airlock/service/watch"
	"github.com/airlockhq/airlock/service/webhook"
)

// ErrNotRoot is returned by New when the process is not root.
var ErrNotRoot = errors.New("airlockd must run as root (runsc, cgroups and mounts need it)")

// Node is one running node: its store, blobs, backends, services and
// front ends, listening on Config.Listen. New builds it and recovers
// what an earlier run left; Run serves until its context ends; Close
// (called by Run) takes it down in the reverse order of its making.
type Node struct {
	cfg    Config
	parts  parts
	logger *slog.Logger

	Store       Store
	Blobs       blobStore
	Images      *image.Store
	Backends    []airlock.Backend // gVisor first
	Registry    *prometheus.Registry
	Quotas      *quota.Ledger
	Abuse       *abuse.Monitor  // nil with Abuse.Off
	Egress      *egress.Service // nil with Egress.Disabled
	Provisioner *provision.Provisioner
	Runner      *run.Runner
	OneShot     *oneshot.Manager
	Sessions    *session.Manager
	Webhooks    *webhook.Service // nil without a master key
	Templates   *template.Service
	Volumes     *volume.Service
	Fleet       *fleet.Fleet // nil without Fleet.Etcd
	Watch       *watch.Service
	E2B         *e2b.Server // nil unless E2B.Enabled or E2B.Listen
	Preview     *preview.Service
	// Handler is what the API listener serves.
	Handler http.Handler

	ln  net.Listener
	srv *http.Server
	// api is the REST API, whose keys the fleet authenticates with.
	api *rest.Server
	// egress and egressLog are the sandboxes' networks and their log as
	// the services see them: the node's proxy, or what WithEgress gave.
	egress    airlock.Egress
	egressLog airlock.EgressStore
	// secrets are the host's own values no image or sandbox may hold.
	secrets *secretscan.Known
	// buildsDue are the images Run builds in the background.
	buildsDue []string
	// etcd is the fleet's etcd client, nil without a fleet; /readyz asks
	// it for the status of a member.
	etcd *clientv3.Client

	// closers run last first in Close: the reverse of the making.
	closers   []func()
	closeOnce sync.Once
	stopOnce  sync.Once
}

// New builds a node from cfg: it locks the state directory, opens the
// store and the blobs, makes the backends and the services, recovers
// what an earlier run left (sessions to reattach, sandboxes and networks
// to end, one-shot runs to record as failed), readies the pool and
// listens. On an error everything made so far is closed again. opts
// replace parts the node would make with the caller's own.
func New(ctx context.Context, cfg Config, opts ...Option) (_ *Node, err error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if os.Geteuid() != 0 {
		return nil, ErrNotRoot
	}
	cfg = cfg.withDefaults()
	n := &Node{cfg: cfg, logger: cfg.Logger}
	for _, o := range opts {
		o(&n.parts)
	}
	defer func() {
		if err != nil {
			n.Close()
		}
	}()
	for _, step := range []func(context.Context) error{
		n.openState,
		n.openBackends,
		n.startServices,
		n.joinFleet,
		n.recover,
		n.listen,
	} {
		if err := step(ctx); err != nil {
			return nil, err
		}
	}
	return n, nil
}

// onClose registers f to run in Close, before everything registered
// earlier.
func (n *Node) onClose(f func()) { n.closers = append(n.closers, f) }

// openState locks the state directory and opens what lives in it: the
// store, tracing, the blobs and the images.
func (n *Node) openState(ctx context.Context) error {
	c := &n.cfg
	if !filepath.IsAbs(c.StateDir) {
		abs, err := filepath.Abs(c.StateDir)
		if err != nil {
			return err
		}
		c.StateDir = abs
	}
	if err := os.MkdirAll(c.StateDir, 0o700); err != nil {
		return err
	}
	lock, err := lockStateDir(c.StateDir)
	if err != nil {
		return err
	}
	n.onClose(func() { lock.Close() })
	if c.AgentPath == "" {
		if exe, err := os.Executable(); err == nil {
			if p := filepath.Join(filepath.Dir(exe), "airlock-agent"); fileExists(p) {
				c.AgentPath = p
			}
		}
	}
	nodeID := "" // a single node's records name no node, as before fleets
	if c.Fleet.enabled() {
		nodeID = c.Fleet.NodeID
	}
	if n.Store = n.parts.store; n.Store == nil {
		if n.Store, err = c.Store.open(ctx, c.StateDir, nodeID, n.logger); err != nil {
			return err
		}
		n.onClose(func() { n.Store.Close() })
	}
	stopTracing, err := c.Trace.setup(ctx, n.logger)
	if err != nil {
		return err
	}
	n.onClose(stopTracing)
	if n.Blobs, err = c.Blobs.open(ctx, c.StateDir, n.logger); err != nil {
		return err
	}
	n.onClose(func() { n.Blobs.Close() })
	if n.Images = n.parts.images; n.Images == nil {
		n.Images, err = image.NewStore(image.StoreConfig{StateDir: c.StateDir, AgentPath: c.AgentPath})
	}
	if err == nil {
		n.buildsDue = n.missingImages(ctx)
	}
	return err
}

// openBackends makes gVisor's backend and those offered besides it.
func (n *Node) openBackends(ctx context.Context) error {
	c := n.cfg
	if n.parts.backends != nil {
		n.Backends = n.parts.backends
		return nil
	}
	gv, err := gvisor.New(gvisor.Config{StateDir: filepath.Join(c.StateDir, "gvisor"), CgroupParent: c.CgroupParent, Logger: n.logger})
	if err != nil {
		return err
	}
	n.onClose(func() { gv.Close() })
	extra, closeExtra, err := extraBackends(c, n.logger)
	if err != nil {
		return err
	}
	n.onClose(closeExtra)
	n.Backends = append([]airlock.Backend{gv}, extra...)
	return nil
}

// Addr is the address the API listens on.
func (n *Node) Addr() net.Addr { return n.ln.Addr() }

// URL is the API's base URL, http:// and Addr.
func (n *Node) URL() string { return "http://" + n.ln.Addr().String() }

// StateDir is the node's state directory, made absolute.
func (n *Node) StateDir() string { return n.cfg.StateDir }

// Run serves the API until ctx ends or the server fails, then shuts the
// node down: it stops admitting work, leaves or ends the sessions (as
// Config.KeepSessions says), waits for running requests and closes the
// node.
func (n *Node) Run(ctx context.Context) error {
	defer n.Close()
	n.srv.BaseContext = func(net.Listener) context.Context { return context.WithoutCancel(ctx) }
	n.logger.Info("airlockd serving", "addr", n.ln.Addr().String(), "state_dir", n.cfg.StateDir)
	if missing := n.buildsDue; len(missing) > 0 {
		bctx, stop := context.WithCancel(ctx)
		built := make(chan struct{})
		go func() { defer close(built); n.buildMissingImages(bctx, missing) }()
		defer func() { stop(); <-built }() // before Close: a build stops with its context
	}
	if n.cfg.ImageGC > 0 {
		gctx, stop := context.WithCancel(ctx)
		collected := make(chan struct{})
		go func() { defer close(collected); n.gcLoop(gctx) }()
		defer func() { stop(); <-collected }()
	}
	errc := make(chan error, 1)
	go func() { errc <- n.srv.Serve(n.ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	if n.cfg.KeepSessions {
		n.logger.Info("shutting down: leaving sessions running for the next start, waiting for running one-shot executions")
	} else {
		n.logger.Info("shutting down: ending sessions, waiting for running executions")
	}
	n.Provisioner.StopAdmitting()
	n.stopSessions() // their requests end now, not at their timeouts
	sctx, cancel := context.WithTimeout(context.Background(), n.cfg.MaxTimeout+30*time.Second)
	defer cancel()
	return n.srv.Shutdown(sctx)
}

// stopSessions leaves the live sessions for the next start, or ends
// them; once, on the way out (a clean shutdown stops them earlier).
func (n *Node) stopSessions() {
	n.stopOnce.Do(func() {
		if n.cfg.KeepSessions {
			detachSessions(n.Sessions, n.logger)
		} else {
			closeSessions(n.Sessions, n.logger)
		}
	})
}

// Close takes down what New made, last made first. Run calls it; call
// it directly only for a node that never ran.
func (n *Node) Close() {
	n.closeOnce.Do(func() {
		for i := len(n.closers) - 1; i >= 0; i-- {
			n.closers[i]()
		}
	})
}

// closeWithin runs close with a context that ends after d, logging a
// failure as what.
func (n *Node) closeWithin(d time.Duration, what string, close func(context.Context) error) func() {
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), d)
		defer cancel()
		if err := close(ctx); err != nil {
			n.logger.Error(what, "err", err)
		}
	}
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
