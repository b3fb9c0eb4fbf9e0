package fleet

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// cache mirrors every key under a prefix: one range read, then a watch
// from the next revision; a watch that fails (compaction, a member
// without leader) reads the range again. Readers never call etcd.
type cache struct {
	cli    *clientv3.Client
	prefix string
	log    *slog.Logger

	mu      sync.RWMutex
	kv      map[string][]byte
	rev     int64
	ready   chan struct{}
	once    sync.Once
	changed chan struct{} // a token after each change, for whoever waits
	// onDelete, if set, is called (without mu) for every key deleted
	// after the first read.
	onDelete func(key string, prev []byte)
}

func newCache(cli *clientv3.Client, prefix string, log *slog.Logger) *cache {
	return &cache{cli: cli, prefix: prefix, log: log, kv: map[string][]byte{}, ready: make(chan struct{}), changed: make(chan struct{}, 1)}
}

// run keeps the cache until ctx ends.
func (c *cache) run(ctx context.Context) {
	backoff := 50 * time.Millisecond
	for ctx.Err() == nil {
		if err := c.follow(ctx); err != nil && ctx.Err() == nil {
			c.log.Debug("fleet: watch cache restarts", "prefix", c.prefix, "err", err)
			select {
			case <-ctx.Done():
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, 2*time.Second)
			continue
		}
		backoff = 50 * time.Millisecond
	}
}

func (c *cache) follow(ctx context.Context) error {
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	resp, err := c.cli.Get(rctx, c.prefix, clientv3.WithPrefix())
	cancel()
	if err != nil {
		return err
	}
	fresh := make(map[string][]byte, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		fresh[string(kv.Key)] = kv.Value
	}
	c.mu.Lock()
	var gone map[string][]byte
	if c.rev > 0 {
		gone = map[string][]byte{}
		for k, v := range c.kv {
			if _, ok := fresh[k]; !ok {
				gone[k] = v
			}
		}
	}
	c.kv, c.rev = fresh, resp.Header.Revision
	c.mu.Unlock()
	for k, v := range gone {
		c.deleted(k, v)
	}
	c.once.Do(func() { close(c.ready) })
	c.poke()

	wctx, wcancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer wcancel()
	for wr := range c.cli.Watch(wctx, c.prefix, clientv3.WithPrefix(), clientv3.WithRev(resp.Header.Revision+1), clientv3.WithPrevKV()) {
		if err := wr.Err(); err != nil {
			return err
		}
		var dels []*mvccpb.KeyValue
		c.mu.Lock()
		for _, ev := range wr.Events {
			k := string(ev.Kv.Key)
			if ev.Type == clientv3.EventTypeDelete {
				if prev, ok := c.kv[k]; ok {
					delete(c.kv, k)
					dels = append(dels, &mvccpb.KeyValue{Key: ev.Kv.Key, Value: prev})
				}
			} else {
				c.kv[k] = ev.Kv.Value
			}
		}
		c.rev = wr.Header.Revision
		c.mu.Unlock()
		for _, kv := range dels {
			c.deleted(string(kv.Key), kv.Value)
		}
		c.poke()
	}
	return ctx.Err()
}

func (c *cache) deleted(k string, v []byte) {
	if c.onDelete != nil {
		c.onDelete(k, v)
	}
}

func (c *cache) poke() {
	select {
	case c.changed <- struct{}{}:
	default:
	}
}

// wait blocks until the first read is in, or ctx ends.
func (c *cache) wait(ctx context.Context) error {
	select {
	case <-c.ready:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (c *cache) get(key string) ([]byte, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	v, ok := c.kv[key]
	return v, ok
}

// each calls f for every key under sub (a prefix inside the cache's).
func (c *cache) each(sub string, f func(key string, v []byte)) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	for k, v := range c.kv {
		if len(k) >= len(sub) && k[:len(sub)] == sub {
			f(k, v)
		}
	}
}
