package fleet

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// Fleet is this node's part of the fleet: its membership, the watch
// caches of members, reservations and sessions, placement and the
// forwarding front. It is safe for concurrent use.
type Fleet struct {
	cfg       Config
	log       *slog.Logger
	cli       *clientv3.Client
	transport http.RoundTripper

	nodes, allocs, sessions *cache

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu       sync.Mutex
	sess     *concurrency.Session // nil while the node is not a member
	self     Node
	inflight map[string]bool // reservations of session creations served here now

	nonces nonces // of the forwards this node accepted

	nodeGone chan struct{}
	onLost   func(node string, sessions, runs int) // tests
}

// New returns a fleet for cfg; Start joins it.
func New(cfg Config) (*Fleet, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.defaults()
	var tr http.RoundTripper = newTransport(cfg.NodeRanges)
	if cfg.WrapTransport != nil {
		tr = cfg.WrapTransport(tr)
	}
	f := &Fleet{cfg: cfg, log: cfg.Logger, cli: cfg.Client, transport: tr, inflight: map[string]bool{}, nodeGone: make(chan struct{}, 1)}
	f.nodes = newCache(cfg.Client, cfg.nodesPrefix(), cfg.Logger)
	f.allocs = newCache(cfg.Client, cfg.allocsPrefix(), cfg.Logger)
	f.sessions = newCache(cfg.Client, cfg.sessionsPrefix(), cfg.Logger)
	f.nodes.onDelete = func(string, []byte) {
		select {
		case f.nodeGone <- struct{}{}:
		default:
		}
	}
	return f, nil
}

// Start joins the fleet (within ctx) and starts the caches, the lease
// keeper, the reaper's campaign and the sweep. Call it before the node
// recovers its sessions, so that a restart within the lease TTL keeps
// them.
func (f *Fleet) Start(ctx context.Context) error {
	f.ctx, f.cancel = context.WithCancel(context.Background())
	for _, c := range []*cache{f.nodes, f.allocs, f.sessions} {
		f.wg.Add(1)
		go func() { defer f.wg.Done(); c.run(f.ctx) }()
	}
	sess, n, err := f.join(ctx)
	if err != nil {
		f.cancel()
		f.wg.Wait()
		return fmt.Errorf("fleet: joining through etcd: %w", err)
	}
	f.mu.Lock()
	f.sess, f.self = sess, n
	f.mu.Unlock()
	for _, c := range []*cache{f.nodes, f.allocs, f.sessions} {
		if err := c.wait(ctx); err != nil {
			f.Close(context.Background(), false)
			return fmt.Errorf("fleet: reading the fleet's state: %w", err)
		}
	}
	f.startReaper(sess)
	f.wg.Add(2)
	go f.keepMembership()
	go func() {
		defer f.wg.Done()
		t := time.NewTicker(f.cfg.SweepEvery)
		defer t.Stop()
		for {
			select {
			case <-f.ctx.Done():
				return
			case <-t.C:
				f.publish(f.ctx)
				f.sweep(f.ctx)
			}
		}
	}()
	return nil
}

// Self returns this node's record as it last wrote it.
func (f *Fleet) Self() Node {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.self
}

// Close stops this node's part. With leave, the lease is revoked: the
// node, its reservations and its mappings go at once (its sessions must
// have ended). Without, the lease is left to expire, or to be taken
// again by the next start within the TTL.
func (f *Fleet) Close(ctx context.Context, leave bool) error {
	if f.cancel == nil {
		return nil
	}
	f.cancel()
	f.wg.Wait()
	f.mu.Lock()
	sess := f.sess
	f.sess = nil
	f.mu.Unlock()
	if sess == nil {
		return nil
	}
	if !leave {
		sess.Orphan()
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, err := f.cli.Revoke(ctx, sess.Lease())
	sess.Orphan()
	return err
}
