package manager

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/airlockhq/airlock"
)

// Manager runs one-shot executions on this node.
type Manager struct {
	cfg   Config
	slots chan struct{}

	metrics        *metrics
	runtimeVersion string
	snaps          *snapshots // nil when the backend cannot snapshot
	pool           *pool
	buildSlot      chan struct{}

	// Background work (pool fills, snapshot builds, destroys) runs under
	// bgCtx and is waited for by Close.
	bg       sync.WaitGroup
	bgCtx    context.Context
	bgCancel context.CancelFunc
	started  bool
}

var _ airlock.Executor = (*Manager)(nil)

// New returns a manager. Call Reconcile, then Start, before serving.
func New(cfg Config) (*Manager, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	m := &Manager{
		cfg:       cfg,
		slots:     make(chan struct{}, cfg.MaxConcurrent),
		metrics:   newMetrics(cfg.Metrics),
		buildSlot: make(chan struct{}, 1),
	}
	m.bgCtx, m.bgCancel = context.WithCancel(context.Background())
	if snap, ok := cfg.Backend.(airlock.Snapshotter); ok && cfg.Backend.Capabilities().Snapshot && cfg.SnapshotDir != "" {
		m.runtimeVersion = snap.SnapshotVersion()
		m.snaps = newSnapshots(m, cfg.SnapshotDir)
	}
	m.pool = newPool(m, cfg.Pool)
	return m, nil
}

// Start starts the warm pool and readies the image/language pairs of
// Pool.Warm (their base snapshots are built in the background).
func (m *Manager) Start(ctx context.Context) error {
	if m.started {
		return fmt.Errorf("manager: started twice")
	}
	m.started = true
	var keep = map[string]bool{}
	for _, w := range m.cfg.Pool.Warm {
		name, lang, ok := strings.Cut(w, "/")
		if !ok || !airlock.Language(lang).Valid() {
			return fmt.Errorf("manager: bad warm pair %q (want image/language)", w)
		}
		img, err := m.cfg.Images.Resolve(ctx, name)
		if err != nil {
			m.cfg.Logger.Warn("not readying a warm pair: its image is not available", "pair", w, "err", err)
			continue
		}
		k := m.keyFor(img, airlock.Language(lang))
		keep[k.name()] = true
		if m.snaps != nil {
			m.snaps.get(k)
		}
		if !m.cfg.Pool.Disabled {
			m.pool.register(k)
		}
	}
	if m.snaps != nil && len(keep) > 0 {
		m.snaps.prune(keep)
	}
	m.bg.Add(1)
	go func() {
		defer m.bg.Done()
		m.pool.run(m.bgCtx)
	}()
	return nil
}

// Close stops the pool, destroys its members and waits for background
// work (destroys of finished sandboxes among it) until ctx ends.
func (m *Manager) Close(ctx context.Context) error {
	m.bgCancel()
	done := make(chan struct{})
	go func() { m.bg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// PoolStats reports the pool's ready members and their measured memory.
func (m *Manager) PoolStats() (members int, memoryBytes int64) { return m.pool.stats() }

// destroyLater destroys a sandbox in the background.
func (m *Manager) destroyLater(sb airlock.Sandbox) {
	m.bg.Add(1)
	go func() {
		defer m.bg.Done()
		if err := sb.Destroy(context.Background()); err != nil {
			m.cfg.Logger.Error("destroy sandbox", "sandbox", sb.ID(), "err", err)
		}
	}()
}

// acquire takes an execution slot, waiting up to QueueTimeout.
func (m *Manager) acquire(ctx context.Context) error {
	t := time.NewTimer(m.cfg.QueueTimeout)
	defer t.Stop()
	select {
	case m.slots <- struct{}{}:
		return nil
	case <-t.C:
		return airlock.Problem(airlock.EUNAVAILABLE, "node-busy", "all %d execution slots of this node are busy; retry later", cap(m.slots))
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (m *Manager) release() { <-m.slots }

// Reconcile ends whatever a crashed server left: sandboxes the backend
// still has and executions recorded as running. Call it once at start,
// before serving.
func (m *Manager) Reconcile(ctx context.Context) error {
	for _, b := range m.backends() {
		ids, err := b.Reconcile(ctx)
		if len(ids) > 0 {
			m.cfg.Logger.Warn("reconciler ended sandboxes left by an earlier run", "backend", b.Name(), "count", len(ids), "ids", ids)
		}
		if err != nil {
			return err
		}
	}
	n, err := m.cfg.Store.FailRunningExecutions(ctx, "interrupted: the server stopped while this execution ran")
	if n > 0 {
		m.cfg.Logger.Warn("reconciler marked interrupted executions failed", "count", n)
	}
	return err
}
