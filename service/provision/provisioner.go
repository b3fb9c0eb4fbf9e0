package provision

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/airlockhq/airlock"
)

// Provisioner hands out the sandboxes of one node. It is safe for
// concurrent use.
type Provisioner struct {
	cfg       Config
	admission *admission
	metrics   *metrics
	snaps     *snapshots // nil when no backend can snapshot or SnapshotDir is empty
	pool      *pool
	buildSlot chan struct{}
	starts    chan struct{} // sandboxes being made now (MaxStarts)
	destroys  chan struct{} // sandboxes being destroyed in the background now

	// Background work (pool fills, snapshot builds, destroys) runs under
	// bgCtx and is waited for by Close.
	bg       sync.WaitGroup
	bgCtx    context.Context
	bgCancel context.CancelFunc

	mu        sync.Mutex
	started   bool
	startedAt time.Time
	warm      []warmKey // registered with Warm before Start
}

// New returns a provisioner. Register warm pairs with Warm, recover
// sessions with Reattach, end the rest with Reconcile, then Start.
func New(cfg Config) (*Provisioner, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	p := &Provisioner{
		cfg:       cfg,
		admission: newAdmission(cfg.Admission),
		metrics:   newMetrics(cfg.Metrics),
		buildSlot: make(chan struct{}, 1),
		starts:    make(chan struct{}, cfg.MaxStarts),
		destroys:  make(chan struct{}, cfg.MaxStarts),
	}
	p.bgCtx, p.bgCancel = context.WithCancel(context.Background())
	if cfg.SnapshotDir != "" {
		p.snaps = newSnapshots(p, cfg.SnapshotDir)
	}
	p.pool = newPool(p, cfg.Pool)
	return p, nil
}

// Backends returns the node's backends, the default first.
func (p *Provisioner) Backends() []airlock.Backend { return slices.Clone(p.cfg.Backends) }

// backend returns the backend named name, or nil.
func (p *Provisioner) backend(name string) airlock.Backend {
	for _, b := range p.cfg.Backends {
		if b.Name() == name {
			return b
		}
	}
	return nil
}

// Start starts the warm pool and readies the pairs registered with Warm
// (their base snapshots are built in the background). Snapshots of keys
// not registered are removed.
func (p *Provisioner) Start(ctx context.Context) error {
	p.mu.Lock()
	if p.started {
		p.mu.Unlock()
		return fmt.Errorf("provision: started twice")
	}
	p.started, p.startedAt = true, time.Now()
	warm := p.warm
	p.mu.Unlock()
	keep := map[string]bool{}
	for _, k := range warm {
		if p.snaps != nil && k.restores() {
			keep[k.name()] = true
			p.snaps.get(k)
		}
		if !p.cfg.Pool.Disabled {
			p.pool.register(k)
		}
	}
	if p.snaps != nil && len(keep) > 0 {
		p.snaps.prune(keep)
	}
	p.bg.Add(1)
	go func() {
		defer p.bg.Done()
		p.pool.run(p.bgCtx)
	}()
	return nil
}

// Warm registers an image readied for a language under limits, before
// any request asks: its base snapshot is built (where its recipe
// restores) and pool members are kept ready from Start on, for the
// recipe and each of its flavours. language "" readies sessions' sandboxes
// (see WarmSessions). Only the default backend's sandboxes are kept warm.
// After Start, a pair registered late (an image built while the node
// serves) is readied at once.
func (p *Provisioner) Warm(img *airlock.Image, language airlock.Language, limits airlock.Limits) {
	p.warmKeys(img, language, limits, 0)
}

// WarmSessions registers the sessions of an image under limits, as
// Warm(img, "", limits) does, with the context memory limit their
// sessions' Specs give (Spec.ContextMemoryBytes): pool members hold the
// recipe's code context started (Recipe.Context).
func (p *Provisioner) WarmSessions(img *airlock.Image, limits airlock.Limits, contextMemoryBytes int64) {
	p.warmKeys(img, "", limits, contextMemoryBytes)
}

func (p *Provisioner) warmKeys(img *airlock.Image, language airlock.Language, limits airlock.Limits, ctxMem int64) {
	flavours := []string{""}
	for f := range p.cfg.Recipes[img.Name][language].Flavours {
		flavours = append(flavours, f)
	}
	p.mu.Lock()
	var late []warmKey
	for _, f := range flavours {
		if k, ok := p.keyFor(p.cfg.Backends[0], img, language, f, limits, ctxMem); ok {
			p.warm = append(p.warm, k)
			if p.started {
				late = append(late, k)
			}
		}
	}
	p.mu.Unlock()
	for _, k := range late {
		if p.snaps != nil && k.restores() {
			p.snaps.get(k)
		}
		if !p.cfg.Pool.Disabled {
			p.pool.register(k)
		}
	}
}

// Close refuses new admissions, stops the pool, destroys its members and
// waits for background work (destroys of released sandboxes among it)
// until ctx ends.
func (p *Provisioner) Close(ctx context.Context) error {
	p.admission.close()
	p.bgCancel()
	done := make(chan struct{})
	go func() { p.bg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// StopAdmitting refuses new admissions (503 shutting-down) while what
// holds a sandbox finishes; Close does it too.
func (p *Provisioner) StopAdmitting() { p.admission.close() }

// PoolStats reports the pool's ready members and their measured memory.
func (p *Provisioner) PoolStats() (members int, memoryBytes int64) { return p.pool.stats() }

// Forget drops what the node keeps ready of the image named name (a
// template being deleted): its pool members are destroyed, its base
// snapshots removed, and none is made for it again. It returns how many
// members it destroyed.
func (p *Provisioner) Forget(name string) int {
	if p.snaps != nil {
		p.snaps.forget(name)
	}
	return p.pool.forget(name)
}

// ImagePool reports the ready pool members of the image named name and
// their measured memory.
func (p *Provisioner) ImagePool(name string) (members int, memoryBytes int64) {
	return p.pool.imageMembers(name)
}

// RootfsInUse returns the root filesystems of the images the node keeps
// ready (registered warm pairs, pool entries): the image garbage
// collector keeps them, with those of the sandboxes that run.
func (p *Provisioner) RootfsInUse() []string {
	seen := map[string]bool{}
	var out []string
	add := func(img *airlock.Image) {
		if img != nil && img.Rootfs != "" && !seen[img.Rootfs] {
			seen[img.Rootfs] = true
			out = append(out, img.Rootfs)
		}
	}
	p.mu.Lock()
	for _, k := range p.warm {
		add(k.img)
	}
	p.mu.Unlock()
	p.pool.mu.Lock()
	for _, e := range p.pool.entries {
		add(e.key.img)
	}
	p.pool.mu.Unlock()
	return out
}

// SnapshotDir is the directory of the node's base snapshots, or "" when
// it keeps none.
func (p *Provisioner) SnapshotDir() string {
	if p.snaps == nil {
		return ""
	}
	return p.snaps.dir
}

// Usage reports what the tenant holds on this node now.
func (p *Provisioner) Usage(tenantID string) Usage { return p.admission.usage(tenantID) }

// Reconcile ends whatever an earlier server left on every backend and
// that no lease of this one holds: call it at start after the sessions
// that survive were reattached, before serving. It returns the IDs it
// ended.
func (p *Provisioner) Reconcile(ctx context.Context) ([]string, error) {
	var all []string
	for _, b := range p.cfg.Backends {
		ids, err := b.Reconcile(ctx)
		if len(ids) > 0 {
			p.cfg.Logger.Warn("reconciler ended sandboxes left by an earlier run", "backend", b.Name(), "count", len(ids), "ids", ids)
		}
		all = append(all, ids...)
		if err != nil {
			return all, err
		}
	}
	return all, nil
}

// startSlot takes one of the node's starts, waiting for one; false if
// ctx ended first.
func (p *Provisioner) startSlot(ctx context.Context) bool {
	select {
	case p.starts <- struct{}{}:
		return true
	case <-ctx.Done():
		return false
	}
}

// endStart gives a start back.
func (p *Provisioner) endStart() { <-p.starts }

// destroyLater destroys a sandbox in the background, at most MaxStarts at
// once so that destroys never take the CPUs from runs (a used sandbox is
// stopped already: waiting costs only its memory for a moment); done, if
// not nil, gets the error.
func (p *Provisioner) destroyLater(sb airlock.Sandbox, done func(error, time.Duration)) {
	p.bg.Add(1)
	go func() {
		defer p.bg.Done()
		p.destroys <- struct{}{}
		defer func() { <-p.destroys }()
		start := time.Now()
		err := sb.Destroy(context.Background())
		if err != nil {
			p.cfg.Logger.Error("destroy sandbox", "sandbox", sb.ID(), "err", err)
		}
		if done != nil {
			done(err, time.Since(start))
		}
	}()
}
