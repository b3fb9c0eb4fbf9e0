// Command airlockd is the Airlock server: the HTTP API, the execution
// manager and the gVisor backend of one node, on embedded defaults
// (SQLite and local directories under --state-dir; --store puts the
// metadata in PostgreSQL instead). It runs as root.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/api/e2b"
	"github.com/airlockhq/airlock/api/rest"
	"github.com/airlockhq/airlock/backend/gvisor"
	"github.com/airlockhq/airlock/backend/microvm/jailer"
	"github.com/airlockhq/airlock/internal/secretscan"
	"github.com/airlockhq/airlock/internal/tracing"
	"github.com/airlockhq/airlock/service/image"
	"github.com/airlockhq/airlock/service/oneshot"
	"github.com/airlockhq/airlock/service/provision"
	"github.com/airlockhq/airlock/service/run"
	"github.com/airlockhq/airlock/service/watch"
)

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

type options struct {
	listen         string
	stateDir       string
	agentPath      string
	maxTimeout     time.Duration
	defaultTimeout time.Duration
	maxConcurrent  int
	memoryMiB      int64
	logLevel       string
	cgroupParent   string
	poolMin        int
	poolMax        int
	poolMemoryMiB  int64
	poolMaxAge     time.Duration
	warm           string
	noSnapshots    bool
	debugListen    string
	namespaces     bool
	microvm        bool
	tenantShare    float64
	maxQueue       int
	maxStarts      int
	keepSessions   bool
	sessions       sessionOptions
	egress         egressOptions
	api            apiOptions
	e2b            e2bOptions
	quotas         quotaOptions
	abuse          abuseOptions
	keep           keepOptions
	blobs          blobOptions
	trace          traceOptions
	store          storeOptions
	fleet          fleetOptions
}

func main() {
	jailer.RunIfAsked() // this binary run again as a microVM's jailer: execs QEMU, never returns
	var o options
	flag.StringVar(&o.listen, "listen", envOr("AIRLOCK_LISTEN", "127.0.0.1:8080"), "address to serve the API on (env AIRLOCK_LISTEN)")
	flag.StringVar(&o.stateDir, "state-dir", envOr("AIRLOCK_STATE_DIR", "/var/lib/airlock"), "state directory: database, blobs, images, sandboxes (env AIRLOCK_STATE_DIR)")
	flag.StringVar(&o.agentPath, "agent", "", "airlock-agent binary the images must carry (default: next to airlockd, if present)")
	flag.DurationVar(&o.maxTimeout, "max-timeout", 5*time.Minute, "longest wall time a request may ask for")
	flag.DurationVar(&o.defaultTimeout, "default-timeout", airlock.DefaultLimits.Timeout, "wall time when a request names none")
	flag.IntVar(&o.maxConcurrent, "max-concurrent", 8, "one-shot executions running at once on this node")
	flag.Float64Var(&o.tenantShare, "tenant-share", 0.75, "share of the one-shot slots (--max-concurrent) one tenant may hold or wait for at once; past it a request gets a 429 at once")
	flag.IntVar(&o.maxQueue, "max-queue", 0, "one-shot executions that may wait for a slot (default 4 x --max-concurrent); past it a request gets a 503 node-busy problem with Retry-After at once")
	flag.IntVar(&o.maxStarts, "max-starts", 0, "sandboxes being made at once, restores and boots, pool fills included (default: the number of CPUs); a request that misses the pool beyond it waits for the next ready sandbox")
	flag.BoolVar(&o.keepSessions, "keep-sessions", true, "on SIGTERM or SIGINT, leave live sessions running for the next start to reattach (false: end them)")
	flag.Int64Var(&o.memoryMiB, "memory-mib", airlock.DefaultLimits.MemoryBytes>>20, "memory limit of a sandbox in MiB")
	flag.StringVar(&o.logLevel, "log-level", "info", "debug, info, warn or error")
	flag.IntVar(&o.poolMin, "pool-min", 1, "ready sandboxes kept per warm image/language even when idle")
	flag.IntVar(&o.poolMax, "pool-max", 8, "most ready sandboxes per warm image/language")
	flag.Int64Var(&o.poolMemoryMiB, "pool-memory-mib", 2048, "memory budget of all ready pool sandboxes, in MiB")
	flag.DurationVar(&o.poolMaxAge, "pool-max-age", 10*time.Minute, "pool sandboxes older than this are replaced")
	flag.StringVar(&o.warm, "warm", "python-ds/python,base/bash,base/node,base/sql", "image/language pairs readied at start (comma-separated; empty for none)")
	flag.StringVar(&o.debugListen, "debug-listen", "", "serve Go's pprof profiles on this address (e.g. 127.0.0.1:6060); off when empty")
	flag.BoolVar(&o.noSnapshots, "no-snapshots", false, "never restore from base snapshots (every sandbox boots)")
	flag.BoolVar(&o.namespaces, "namespaces", envOr("AIRLOCK_NAMESPACES", "") == "1", "also offer the namespaces backend (isolation \"container\", first-party tenants only) (env AIRLOCK_NAMESPACES=1)")
	flag.StringVar(&o.cgroupParent, "cgroup-parent", "airlock", "host cgroup that holds every sandbox's cgroup (the reconciler owns all of it)")
	flag.BoolVar(&o.microvm, "microvm", envOr("AIRLOCK_MICROVM", "") == "1", "also offer the microVM backend (isolation \"vm\": QEMU microvm guests, KVM when it works, else TCG) (env AIRLOCK_MICROVM=1)")
	o.sessions.register(flag.CommandLine)
	o.egress.register(flag.CommandLine)
	o.api.register(flag.CommandLine)
	o.e2b.register(flag.CommandLine)
	o.quotas.register(flag.CommandLine)
	o.abuse.register(flag.CommandLine)
	o.keep.register(flag.CommandLine)
	o.blobs.register(flag.CommandLine)
	o.trace.register(flag.CommandLine)
	o.store.register(flag.CommandLine)
	o.fleet.register(flag.CommandLine)
	flag.Parse()
	if err := o.api.resolve(); err != nil {
		fmt.Fprintf(os.Stderr, "airlockd: %v\n", err)
		os.Exit(2)
	}
	if err := o.store.resolve(); err != nil {
		fmt.Fprintf(os.Stderr, "airlockd: %v\n", err)
		os.Exit(2)
	}
	if err := o.fleet.resolve(o.listen); err != nil {
		fmt.Fprintf(os.Stderr, "airlockd: %v\n", err)
		os.Exit(2)
	}

	var level slog.Level
	if err := level.UnmarshalText([]byte(o.logLevel)); err != nil {
		fmt.Fprintf(os.Stderr, "airlockd: bad --log-level: %v\n", err)
		os.Exit(2)
	}
	// Records logged with a request's context carry its trace_id and span_id.
	logger := slog.New(tracing.LogHandler(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})))
	slog.SetDefault(logger)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := serve(ctx, o, logger); err != nil {
		logger.Error("airlockd stopped", "err", err)
		os.Exit(1)
	}
}

func serve(ctx context.Context, o options, logger *slog.Logger) error {
	if os.Geteuid() != 0 {
		return errors.New("airlockd must run as root (runsc, cgroups and mounts need it)")
	}
	if !filepath.IsAbs(o.stateDir) {
		abs, err := filepath.Abs(o.stateDir)
		if err != nil {
			return err
		}
		o.stateDir = abs
	}
	if err := os.MkdirAll(o.stateDir, 0o700); err != nil {
		return err
	}
	stateLock, err := lockStateDir(o.stateDir)
	if err != nil {
		return err
	}
	defer stateLock.Close()
	if o.agentPath == "" {
		if exe, err := os.Executable(); err == nil {
			if p := filepath.Join(filepath.Dir(exe), "airlock-agent"); fileExists(p) {
				o.agentPath = p
			}
		}
	}

	nodeID := "" // a single node's records name no node, as before fleets
	if o.fleet.enabled() {
		nodeID = o.fleet.nodeID
	}
	store, err := o.store.open(ctx, o.stateDir, nodeID, logger)
	if err != nil {
		return err
	}
	defer store.Close()
	stopTracing, err := o.trace.setup(ctx, logger)
	if err != nil {
		return err
	}
	defer stopTracing()
	blobs, err := o.blobs.open(ctx, o.stateDir, logger)
	if err != nil {
		return err
	}
	defer blobs.Close()
	images, err := image.NewStore(image.StoreConfig{StateDir: o.stateDir, AgentPath: o.agentPath})
	if err != nil {
		return err
	}
	backend, err := gvisor.New(gvisor.Config{StateDir: filepath.Join(o.stateDir, "gvisor"), CgroupParent: o.cgroupParent, Logger: logger})
	if err != nil {
		return err
	}
	extra, closeExtra, err := extraBackends(o, logger)
	if err != nil {
		return err
	}
	defer closeExtra()
	limits := airlock.DefaultLimits
	limits.Timeout = o.defaultTimeout
	limits.MemoryBytes = o.memoryMiB << 20
	var warm []string
	for _, w := range strings.Split(o.warm, ",") {
		if w = strings.TrimSpace(w); w != "" {
			warm = append(warm, w)
		}
	}
	snapshotDir := filepath.Join(o.stateDir, "snapshots")
	if o.noSnapshots {
		snapshotDir = ""
	}
	registry := prometheus.NewRegistry()
	registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	// The quotas' counters are written last on the way out, after every
	// sandbox has ended or been left for the next start.
	quotas, err := newQuotas(ctx, o.quotas, o.sessions.maxPerTenant, o.stateDir, store, registry, logger)
	if err != nil {
		return err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := quotas.Close(cctx); err != nil {
			logger.Error("writing the quotas' counters", "err", err)
		}
	}()
	secrets := hostSecrets(o.stateDir, o.api.metricsKey)
	o.blobs.addSecrets(secrets)
	monitor, err := startAbuse(o.abuse, store, registry, logger)
	if err != nil {
		return err
	}
	if monitor != nil {
		defer monitor.Close()
	}
	eg, err := startEgress(o.egress, o.stateDir, egressStoreOf(monitor, store), store, quotas, secrets, logger)
	if err != nil {
		return err
	}
	if eg != nil {
		defer func() { // after the sessions and the manager: their networks go first
			cctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := eg.Close(cctx); err != nil {
				logger.Error("stopping the egress proxy", "err", err)
			}
		}()
	}
	prov, err := provision.New(provision.Config{
		Backends: append([]airlock.Backend{backend}, extra...),
		Admission: provision.Admission{
			OneShot:            o.maxConcurrent,
			OneShotTenantShare: o.tenantShare,
			MaxQueue:           o.maxQueue,
			Sessions:           o.sessions.max,
		},
		Quotas:      quotas,
		SnapshotDir: snapshotDir,
		MaxStarts:   o.maxStarts,
		Pool: provision.PoolConfig{
			Min:          o.poolMin,
			Max:          o.poolMax,
			MemoryBudget: o.poolMemoryMiB << 20,
			MaxAge:       o.poolMaxAge,
			Disabled:     o.poolMax == 0,
		},
		Egress:      egressOf(eg),
		Secrets:     secretscan.Default().WithKnown(secrets),
		Quarantines: store,
		Metrics:     registry,
		Logger:      logger,
	})
	if err != nil {
		return err
	}
	runner, err := run.New(run.Config{Store: store, Metrics: registry, Watchdog: watchdogOf(monitor), Logger: logger})
	if err != nil {
		return err
	}
	mgr, err := oneshot.New(oneshot.Config{
		Provisioner:  prov,
		Runner:       runner,
		Images:       images,
		Store:        store,
		Blobs:        blobs,
		Limits:       limits,
		MaxTimeout:   o.maxTimeout,
		NetworkAllow: o.egress.allowFor,
		Logger:       logger,
	})
	if err != nil {
		return err
	}
	keepCfg, err := o.keep.config(o.stateDir, store, blobs, logger)
	if err != nil {
		return err
	}
	sessions, err := newSessions(o.sessions, keepCfg, prov, runner, images, store, egressOf(eg), egressLogOf(eg, store), logger)
	if err != nil {
		return err
	}
	// In a fleet, join first: a restart within the lease TTL takes its
	// lease back, so the sessions recovered below are still this node's.
	fl, etcdClient, err := startFleet(ctx, o.fleet, o.sessions.sizes, limits, o.sessions.max, o.maxConcurrent, o.stateDir, sessions, prov, store, logger)
	if err != nil {
		return err
	}
	if fl != nil {
		defer etcdClient.Close()
		defer func() { // after the sessions stopped (deferred later, so run earlier)
			cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := fl.Close(cctx, !o.keepSessions); err != nil {
				logger.Error("leaving the fleet", "err", err)
			}
		}()
	}
	// At start, in this order: take back the sessions an earlier run left
	// (their sandboxes kept running), end every other sandbox and network
	// it left, record its one-shot runs as failed, then ready the pool.
	if err := recoverSessions(ctx, sessions, logger); err != nil {
		return err
	}
	if fl != nil {
		if err := fl.Adopt(ctx); err != nil {
			return fmt.Errorf("fleet: mapping the recovered sessions: %w", err)
		}
	}
	if _, err := prov.Reconcile(ctx); err != nil {
		return fmt.Errorf("reconcile: %w", err)
	}
	if err := reconcileEgress(ctx, eg, logger); err != nil {
		return err
	}
	if _, err := mgr.FailInterrupted(ctx); err != nil {
		return fmt.Errorf("reconcile: %w", err)
	}
	if err := mgr.Warm(ctx, warm); err != nil {
		return err
	}
	if err := warmSessions(ctx, o.sessions, sessions, logger); err != nil {
		return err
	}
	if err := prov.Start(ctx); err != nil {
		return err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := prov.Close(cctx); err != nil {
			logger.Error("stopping the provisioner", "err", err)
		}
	}()
	stopSessions := func() { // once, on the way out; a clean shutdown stops them earlier
		if o.keepSessions {
			detachSessions(sessions, logger)
		} else {
			closeSessions(sessions, logger)
		}
	}
	defer stopSessions()
	if err := bootstrapTenant(ctx, store, o.stateDir, logger); err != nil {
		return err
	}
	if err := bootstrapAdmin(ctx, store, o.stateDir, logger); err != nil {
		return err
	}
	signingKey, err := o.blobs.signingKey(o.stateDir)
	if err != nil {
		return err
	}
	// Listen first: whether /metrics needs its key depends on the
	// address really bound.
	ln, err := net.Listen("tcp", o.listen)
	if err != nil {
		return err
	}
	defer ln.Close()
	loopback := loopbackOnly(ln.Addr())
	if !loopback && o.api.metricsKey == "" {
		logger.Warn("/metrics is closed (403): airlockd listens beyond loopback without --metrics-key", "addr", ln.Addr().String())
	}
	watched, err := watch.New(watch.Config{Sessions: sessions}) // GET /v1/sessions/{id}/output
	if err != nil {
		return err
	}
	api, err := rest.New(rest.Config{
		Store:        store,
		Events:       store,
		Blobs:        blobs,
		Executor:     mgr,
		Ready:        readiness(images),
		MicroVM:      microvmAccel(extra),
		Metrics:      promhttp.HandlerFor(registry, promhttp.HandlerOpts{}),
		MetricsKey:   o.api.metricsKey,
		LoopbackOnly: loopback,
		PublicURL:    o.api.publicURL,
		Sessions:     watched,
		Usage:        quotas,
		Admin:        store,
		Audit:        store,
		QuotaNames:   quotaNames(),
		Keep:         sessions,
		SigningKey:   signingKey,
		MaxTimeout:   o.maxTimeout,
		Logger:       logger,
	})
	if err != nil {
		return err
	}
	// The front door: /mcp and /console beside the native API, and the
	// E2B routes in front of all (their paths and headers never collide).
	handler, err := frontDoor(api.Handler(), store, logger)
	if err != nil {
		return err
	}
	var e2bSrv *e2b.Server
	if o.e2b.enabled || o.e2b.listen != "" {
		if e2bSrv, err = newE2B(o.e2b, o.sessions, o.stateDir, sessions, store, o.egress.allowFor, logger); err != nil {
			return err
		}
		if o.e2b.enabled {
			handler = e2bSrv.Wrap(handler)
		}
	}
	if fl != nil {
		// Any node takes any request: new runs and sessions are placed,
		// a session's requests go to its node.
		handler = fl.Handler(handler)
	}
	srv := &http.Server{
		Handler:           tracing.Middleware(handler), // the receive span of every request
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       time.Minute,
		WriteTimeout:      o.maxTimeout + 2*time.Minute,
		IdleTimeout:       2 * time.Minute,
		BaseContext:       func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
	}
	srv.RegisterOnShutdown(watched.Close) // watches last as long as their sessions: end them
	if o.debugListen != "" {
		if err := serveDebug(o.debugListen, logger); err != nil {
			return err
		}
	}
	if o.e2b.listen != "" {
		closeE2B, err := serveE2B(o.e2b.listen, e2bSrv, srv, logger)
		if err != nil {
			return err
		}
		defer closeE2B()
	}
	logger.Info("airlockd serving", "addr", ln.Addr().String(), "state_dir", o.stateDir)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	if o.keepSessions {
		logger.Info("shutting down: leaving sessions running for the next start, waiting for running one-shot executions")
	} else {
		logger.Info("shutting down: ending sessions, waiting for running executions")
	}
	prov.StopAdmitting()
	stopSessions() // their requests end now, not at their timeouts
	sctx, cancel := context.WithTimeout(context.Background(), o.maxTimeout+30*time.Second)
	defer cancel()
	return srv.Shutdown(sctx)
}

// readiness reports ready when runsc and the default images are present.
func readiness(images airlock.ImageResolver) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		if _, err := execLookPath("runsc"); err != nil {
			return airlock.Errorf(airlock.EUNAVAILABLE, "runsc is not installed")
		}
		for _, name := range []string{"base", "python-ds"} {
			if _, err := images.Resolve(ctx, name); err != nil {
				return airlock.Errorf(airlock.EUNAVAILABLE, "image %s is not built", name)
			}
		}
		return nil
	}
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
