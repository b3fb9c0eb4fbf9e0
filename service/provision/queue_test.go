package provision_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/testenv/testreq"
	"github.com/airlockhq/airlock/service/provision"
)

// slowBackend makes sandboxes that take a while to boot and counts how
// many it makes at once. It can snapshot (so the pool serves it) but its
// recipes here have no runtime, so nothing is restored.
type slowBackend struct {
	boot    time.Duration
	active  atomic.Int32
	most    atomic.Int32
	created atomic.Int32
}

func (b *slowBackend) Name() string { return "slow" }
func (b *slowBackend) Capabilities() airlock.Capabilities {
	return airlock.Capabilities{SeparateKernel: true}
}
func (b *slowBackend) Reconcile(context.Context) ([]string, error) { return nil, nil }
func (b *slowBackend) Create(ctx context.Context, spec airlock.SandboxSpec) (airlock.Sandbox, error) {
	n := b.active.Add(1)
	defer b.active.Add(-1)
	for {
		m := b.most.Load()
		if n <= m || b.most.CompareAndSwap(m, n) {
			break
		}
	}
	select {
	case <-time.After(b.boot): // the work of a boot, not a synchronisation
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	b.created.Add(1)
	return &stubSandbox{id: spec.ID, done: make(chan struct{})}, nil
}
func (b *slowBackend) Checkpoint(context.Context, airlock.Sandbox, string) error {
	return errors.New("no checkpoints here")
}
func (b *slowBackend) Restore(context.Context, airlock.SandboxSpec, string) (airlock.Sandbox, error) {
	return nil, errors.New("no restores here")
}
func (b *slowBackend) SnapshotVersion() string { return "v1" }

type stubSandbox struct {
	id        string
	done      chan struct{}
	destroyed atomic.Int32
}

func (s *stubSandbox) ID() string                                   { return s.id }
func (s *stubSandbox) Agent() airlock.Agent                         { return nil }
func (s *stubSandbox) WorkspaceDir() string                         { return "" }
func (s *stubSandbox) Stats(context.Context) (airlock.Stats, error) { return airlock.Stats{}, nil }
func (s *stubSandbox) Stop(context.Context) error                   { return nil }
func (s *stubSandbox) Done() <-chan struct{}                        { return s.done }
func (s *stubSandbox) Destroy(context.Context) error {
	s.destroyed.Add(1)
	return nil
}

// Requests that miss the pool while every start of the node is busy wait
// for the next pool member instead of starting more: the node never makes
// more sandboxes at once than MaxStarts, every request is served, and no
// sandbox is handed out twice.
func TestMissesQueueForReadySandboxes(t *testing.T) {
	b := &slowBackend{boot: 50 * time.Millisecond}
	p, err := provision.New(provision.Config{
		Backends:  []airlock.Backend{b},
		MaxStarts: 1,
		Pool:      provision.PoolConfig{Min: 1, Max: 4},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	img := &airlock.Image{Name: "img", Hash: "h"}
	p.Warm(img, "", airlock.DefaultLimits)
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close(context.Background()) })
	testreq.Eventually(t, 10*time.Second, "the pool's first member", func() bool {
		n, _ := p.PoolStats()
		return n == 1
	})
	const n = 8
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		seen    = map[airlock.Sandbox]bool{}
		sources = map[string]int{}
		leases  []*provision.Lease
	)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tk, err := p.Admit(ctx, provision.Claim{Kind: provision.Session, Tenant: &airlock.Tenant{ID: "t"}})
			if err != nil {
				t.Error(err)
				return
			}
			l, err := tk.Acquire(ctx, provision.Spec{ID: "s" + string(rune('a'+i)), Image: img, Limits: airlock.DefaultLimits})
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if seen[l.Sandbox()] {
				t.Errorf("sandbox %s handed out twice", l.Sandbox().ID())
			}
			seen[l.Sandbox()] = true
			sources[l.StartSource()]++
			leases = append(leases, l)
		}()
	}
	wg.Wait()
	if got := b.most.Load(); got > 1 {
		t.Errorf("%d sandboxes were made at once, want at most MaxStarts (1)", got)
	}
	if sources[airlock.StartPool] == 0 {
		t.Errorf("no request got a pool member: %v", sources)
	}
	t.Logf("%d requests: %v; %d sandboxes made", n, sources, b.created.Load())
	for _, l := range leases {
		l.Release(nil)
	}
	testreq.Eventually(t, 10*time.Second, "every released sandbox destroyed", func() bool {
		for sb := range seen {
			if sb.(*stubSandbox).destroyed.Load() != 1 {
				return false
			}
		}
		return true
	})
}

// Past the queue, a one-shot run is refused at once with a 503 and
// Retry-After instead of waiting to time out.
func TestQueueBound(t *testing.T) {
	p := newProvisioner(t, provision.Admission{OneShot: 1, OneShotTenantShare: 1, MaxQueue: 1, QueueTimeout: time.Minute})
	ctx := context.Background()
	claim := func(id string) provision.Claim {
		return provision.Claim{Kind: provision.OneShot, Tenant: &airlock.Tenant{ID: id}}
	}
	first, err := p.Admit(ctx, claim("a"))
	if err != nil {
		t.Fatal(err)
	}
	queued := make(chan error, 1)
	go func() {
		tk, err := p.Admit(ctx, claim("b"))
		if err == nil {
			tk.Cancel()
		}
		queued <- err
	}()
	// The second waits in the queue; the third finds the queue full.
	testreq.Eventually(t, 5*time.Second, "the second request to wait", func() bool { return p.Usage("b").OneShot == 1 })
	start := time.Now()
	_, err3 := p.Admit(ctx, claim("c"))
	if took := time.Since(start); took > time.Second {
		t.Errorf("a request past the queue waited %v", took)
	}
	wantProblem(t, "past the queue", err3, airlock.EUNAVAILABLE, provision.ProblemNodeBusy, true)
	first.Cancel()
	if err := <-queued; err != nil {
		t.Errorf("the queued request: %v", err)
	}
}

// An image registered after Start (one airlockd built while it served)
// gets pool members too, without a restart.
func TestWarmAfterStart(t *testing.T) {
	b := &slowBackend{boot: 10 * time.Millisecond}
	p, err := provision.New(provision.Config{
		Backends: []airlock.Backend{b},
		Pool:     provision.PoolConfig{Min: 1, Max: 2},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close(context.Background()) })
	if n, _ := p.PoolStats(); n != 0 {
		t.Fatalf("%d pool members with nothing registered", n)
	}
	p.Warm(&airlock.Image{Name: "late", Hash: "h"}, "", airlock.DefaultLimits)
	testreq.Eventually(t, 10*time.Second, "a pool member of the image registered after Start", func() bool {
		n, _ := p.PoolStats()
		return n >= 1
	})
}
