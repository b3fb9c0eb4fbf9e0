package quota

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// EtcdConfig configures EtcdCounters.
type EtcdConfig struct {
	Client *clientv3.Client // required
	// NodeID names this node (its holds' keys carry it, so a restart
	// finds and drops those of its earlier run).
	NodeID string
	// Prefix is the key prefix of the counters ("/airlock/quota/").
	Prefix string
	// TTL is the lease this node's holds live under (10 s): a node that
	// stops renewing it (killed, or cut off from etcd) loses them after
	// TTL, as the fleet's membership does.
	TTL time.Duration
	// Timeout bounds each call to etcd in a Take, Drop or State (3 s):
	// etcd silent that long makes the counters ErrSharedUnavailable. A
	// Take that loses its compare-and-swap to other nodes' takes (etcd
	// answered, so it is reachable) tries again for up to
	// contentionRounds Timeouts in all before it gives up.
	Timeout time.Duration
	Logger  *slog.Logger
}

// Validate fills defaults and checks the config.
func (c *EtcdConfig) Validate() error {
	if c.Client == nil {
		return errors.New("quota: etcd counters need a client")
	}
	if c.NodeID == "" || strings.ContainsAny(c.NodeID, "/") {
		return fmt.Errorf("quota: etcd counters need a node ID without '/', not %q", c.NodeID)
	}
	if c.Prefix == "" {
		c.Prefix = "/airlock/quota/"
	}
	if !strings.HasSuffix(c.Prefix, "/") {
		return errors.New("quota: the etcd prefix must end in /")
	}
	if c.TTL <= 0 {
		c.TTL = 10 * time.Second
	}
	if c.TTL < 2*time.Second {
		return errors.New("quota: the etcd lease TTL must be at least 2s")
	}
	if c.Timeout <= 0 {
		c.Timeout = 3 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return nil
}

// EtcdCounters keep the fleet's shared counters in etcd, one key per
// hold and one per tenant for its executions:
//
//	<prefix>t/<tenant>/h/<node>/<hold>   a hold, under the node's lease
//	<prefix>t/<tenant>/x                 the tenant's executions of the
//	                                     last minute (a JSON list of Unix
//	                                     milliseconds)
//
// A Take reads the tenant's keys and writes in one transaction that
// fails if any of them changed since the read (then it reads again), so
// two nodes never both take the last unit of a quota. Holds live under
// this node's lease: a node that dies or is cut off from etcd past TTL
// loses them, and the rest of the fleet stops counting them then (as
// the fleet marks that node's sessions lost). A lease lost and granted
// again gets this node's live holds written back.
type EtcdCounters struct {
	cfg   EtcdConfig
	cli   *clientv3.Client
	log   *slog.Logger
	locks [64]sync.Mutex // one Take per tenant at a time on this node

	mu      sync.Mutex
	lease   clientv3.LeaseID // 0 while there is none
	live    map[string]string
	dirty   bool                // live holds not written under the lease yet
	retries map[string]struct{} // hold keys whose delete failed

	ready   chan struct{}
	cancel  context.CancelFunc
	done    chan struct{}
	started bool
}

var _ Shared = (*EtcdCounters)(nil)

// NewEtcdCounters returns counters on etcd; Start gets them a lease.
func NewEtcdCounters(cfg EtcdConfig) (*EtcdCounters, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &EtcdCounters{cfg: cfg, cli: cfg.Client, log: cfg.Logger, live: map[string]string{}, retries: map[string]struct{}{},
		ready: make(chan struct{}), done: make(chan struct{})}, nil
}

// Start drops the holds an earlier run of this node left (the sessions
// it takes back are recorded again, with Force), grants the node's
// lease and keeps it alive until Close.
func (e *EtcdCounters) Start(ctx context.Context) error {
	if err := e.dropNode(ctx); err != nil {
		return fmt.Errorf("quota: dropping this node's earlier holds: %w", err)
	}
	rctx, cancel := context.WithCancel(context.Background())
	e.cancel = cancel
	e.started = true
	go e.run(rctx)
	select {
	case <-e.ready:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("quota: granting the etcd lease: %w", ctx.Err())
	}
}

// Close stops renewing the lease. It does not revoke it: sandboxes left
// running for the next start stay counted until it takes them back or
// the lease expires.
func (e *EtcdCounters) Close() {
	if !e.started {
		return
	}
	e.cancel()
	<-e.done
}

func (e *EtcdCounters) tenantPrefix(tenantID string) string {
	return e.cfg.Prefix + "t/" + tenantID + "/"
}
func (e *EtcdCounters) execKey(tenantID string) string { return e.tenantPrefix(tenantID) + "x" }
func (e *EtcdCounters) holdKey(tenantID, id string) string {
	return e.tenantPrefix(tenantID) + "h/" + e.cfg.NodeID + "/" + id
}

// dropNode deletes every hold of this node's ID.
func (e *EtcdCounters) dropNode(ctx context.Context) error {
	resp, err := e.cli.Get(ctx, e.cfg.Prefix+"t/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		return err
	}
	mark := "/h/" + e.cfg.NodeID + "/"
	var ops []clientv3.Op
	for _, kv := range resp.Kvs {
		if strings.Contains(strings.TrimPrefix(string(kv.Key), e.cfg.Prefix), mark) {
			ops = append(ops, clientv3.OpDelete(string(kv.Key)))
		}
	}
	for len(ops) > 0 {
		n := min(len(ops), 100)
		if _, err := e.cli.Txn(ctx).Then(ops[:n]...).Commit(); err != nil {
			return err
		}
		ops = ops[n:]
	}
	if len(resp.Kvs) > 0 {
		e.log.Debug("quota: dropped this node's earlier holds", "node", e.cfg.NodeID)
	}
	return nil
}

// run grants the lease, keeps it alive, and when it is lost grants
// another and writes the live holds back under it.
func (e *EtcdCounters) run(ctx context.Context) {
	defer close(e.done)
	var once sync.Once
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		lease, err := e.grant(ctx)
		if err == nil {
			err = e.rewrite(ctx, lease)
		}
		if err != nil {
			if ctx.Err() == nil {
				e.log.Warn("quota: no etcd lease for the shared counters; new work is refused", "err", err)
			}
			sleep(ctx, backoff)
			backoff = min(2*backoff, 2*time.Second)
			continue
		}
		backoff = 100 * time.Millisecond
		kctx, kcancel := context.WithCancel(ctx)
		ch, err := e.cli.KeepAlive(kctx, lease)
		if err != nil {
			kcancel()
			continue
		}
		e.setLease(lease)
		once.Do(func() { close(e.ready) })
		tick := time.NewTicker(time.Second)
	alive:
		for {
			select {
			case _, ok := <-ch:
				if !ok {
					break alive
				}
			case <-tick.C:
				e.retryDrops(ctx)
			}
		}
		tick.Stop()
		kcancel()
		e.setLease(0)
		if ctx.Err() == nil {
			e.log.Warn("quota: the etcd lease of the shared counters was lost; new work is refused until it is back", "node", e.cfg.NodeID)
		}
	}
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

func (e *EtcdCounters) grant(ctx context.Context) (clientv3.LeaseID, error) {
	gctx, cancel := context.WithTimeout(ctx, e.cfg.Timeout)
	defer cancel()
	resp, err := e.cli.Grant(gctx, int64((e.cfg.TTL+time.Second-1)/time.Second))
	if err != nil {
		return 0, err
	}
	return resp.ID, nil
}

// rewrite puts every live hold under the lease (a lease lost took them
// with it; a Force record may not have been written at all).
func (e *EtcdCounters) rewrite(ctx context.Context, lease clientv3.LeaseID) error {
	e.mu.Lock()
	ops := make([]clientv3.Op, 0, len(e.live))
	for k, v := range e.live {
		ops = append(ops, clientv3.OpPut(k, v, clientv3.WithLease(lease)))
	}
	e.dirty = false
	e.mu.Unlock()
	wctx, cancel := context.WithTimeout(ctx, e.cfg.Timeout)
	defer cancel()
	for len(ops) > 0 {
		n := min(len(ops), 100)
		if _, err := e.cli.Txn(wctx).Then(ops[:n]...).Commit(); err != nil {
			e.mu.Lock()
			e.dirty = true
			e.mu.Unlock()
			return err
		}
		ops = ops[n:]
	}
	return nil
}

func (e *EtcdCounters) setLease(id clientv3.LeaseID) {
	e.mu.Lock()
	e.lease = id
	e.mu.Unlock()
}

// currentLease is the lease new holds go under, 0 if there is none.
func (e *EtcdCounters) currentLease() clientv3.LeaseID {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.lease
}

func (e *EtcdCounters) lock(tenantID string) *sync.Mutex {
	h := fnv.New32a()
	h.Write([]byte(tenantID))
	return &e.locks[h.Sum32()%uint32(len(e.locks))]
}

// holdValue is a hold's value in etcd.
type holdValue struct {
	Kind     string `json:"k"`
	MilliCPU int64  `json:"cpu,omitempty"`
	Memory   int64  `json:"mem,omitempty"`
	Admitted int64  `json:"at"`
	Deadline int64  `json:"until,omitempty"`
}

func kindName(k Kind) string {
	if k == Session {
		return "session"
	}
	return "run"
}

func encodeHold(r Record) string {
	v := holdValue{Kind: kindName(r.Kind), MilliCPU: r.MilliCPU, Memory: r.MemoryBytes, Admitted: r.Admitted.UnixMilli()}
	if !r.Deadline.IsZero() {
		v.Deadline = r.Deadline.UnixMilli()
	}
	b, _ := json.Marshal(v)
	return string(b)
}

func decodeHold(id string, b []byte) (Record, bool) {
	var v holdValue
	if json.Unmarshal(b, &v) != nil {
		return Record{}, false
	}
	r := Record{ID: id, Kind: Run, MilliCPU: v.MilliCPU, MemoryBytes: v.Memory, Admitted: time.UnixMilli(v.Admitted)}
	if v.Kind == "session" {
		r.Kind = Session
	}
	if v.Deadline != 0 {
		r.Deadline = time.UnixMilli(v.Deadline)
	}
	return r, true
}

// maxExecs bounds the executions a tenant's window keeps (a tenant
// without a rate limit could start more; its use then shows this many).
const maxExecs = 10000

func decodeExecs(b []byte) []int64 {
	var ms []int64
	if len(b) > 0 && json.Unmarshal(b, &ms) != nil {
		return nil
	}
	slices.Sort(ms)
	return ms
}

func encodeExecs(ms []int64) string {
	b, _ := json.Marshal(ms)
	return string(b)
}

// state parses a read of the tenant's prefix.
func (e *EtcdCounters) state(tenantID string, resp *clientv3.GetResponse) (SharedState, []int64) {
	var st SharedState
	var execs []int64
	xk := e.execKey(tenantID)
	for _, kv := range resp.Kvs {
		k := string(kv.Key)
		if k == xk {
			execs = decodeExecs(kv.Value)
			continue
		}
		if r, ok := decodeHold(k[strings.LastIndexByte(k, '/')+1:], kv.Value); ok {
			st.Holds = append(st.Holds, r)
		}
	}
	for _, ms := range execs {
		st.Execs = append(st.Execs, time.UnixMilli(ms))
	}
	return st, execs
}

func unavailable(err error) error {
	if errors.Is(err, ErrSharedUnavailable) {
		return err
	}
	return fmt.Errorf("%w: %v", ErrSharedUnavailable, err)
}

// Take implements Shared.
func (e *EtcdCounters) Take(ctx context.Context, tenantID string, r Record, check func(SharedState) error) error {
	if r.Force && r.ID != "" {
		ctx, cancel := context.WithTimeout(ctx, e.cfg.Timeout)
		defer cancel()
		return e.force(ctx, tenantID, r)
	}
	// This node's takes of one tenant go one at a time (each bounded by
	// Timeout): only other nodes' contend in etcd.
	mu := e.lock(tenantID)
	mu.Lock()
	defer mu.Unlock()
	lease := e.currentLease()
	if lease == 0 && r.ID != "" {
		return unavailable(errors.New("no lease"))
	}
	ctx, cancel := context.WithTimeout(ctx, contentionRounds*e.cfg.Timeout)
	defer cancel()
	prefix := e.tenantPrefix(tenantID)
	for attempt := 0; ; attempt++ {
		succeeded, err := e.tryTake(ctx, tenantID, prefix, lease, r, check)
		if err != nil || succeeded {
			return err
		}
		// Another node changed the tenant's counters meanwhile: read
		// them again, after a short pause that spreads the contenders.
		sleep(ctx, time.Duration(rand.IntN(1+min(attempt, 10)*2))*time.Millisecond)
		if ctx.Err() != nil {
			return unavailable(fmt.Errorf("no agreement after %d attempts: %w", attempt+1, ctx.Err()))
		}
	}
}

// contentionRounds is how many Timeouts a Take may spend losing its
// compare-and-swap to other nodes before it answers unavailable.
const contentionRounds = 4

// tryTake is one round of Take: read the tenant's counters, check them
// and write the hold if nobody changed them since. Each of its two calls
// to etcd is bounded by Timeout.
func (e *EtcdCounters) tryTake(ctx context.Context, tenantID, prefix string, lease clientv3.LeaseID, r Record, check func(SharedState) error) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, e.cfg.Timeout)
	defer cancel()
	resp, err := e.cli.Get(ctx, prefix, clientv3.WithPrefix())
	if err != nil {
		return false, unavailable(err)
	}
	st, execs := e.state(tenantID, resp)
	if !r.Force {
		if err := check(st); err != nil {
			return false, err
		}
	}
	var ops []clientv3.Op
	var val string
	if r.ID != "" {
		val = encodeHold(r)
		ops = append(ops, clientv3.OpPut(e.holdKey(tenantID, r.ID), val, clientv3.WithLease(lease)))
	}
	if r.Exec {
		at := r.Admitted.UnixMilli()
		cut := at - time.Minute.Milliseconds()
		keep := execs[:0:0]
		for _, ms := range execs {
			if ms > cut {
				keep = append(keep, ms)
			}
		}
		keep = append(keep, at)
		if len(keep) > maxExecs {
			keep = keep[len(keep)-maxExecs:]
		}
		ops = append(ops, clientv3.OpPut(e.execKey(tenantID), encodeExecs(keep)))
	}
	if len(ops) == 0 {
		return true, nil
	}
	txn, err := e.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.ModRevision(prefix), "<", resp.Header.Revision+1).WithPrefix()).
		Then(ops...).Commit()
	if err != nil {
		return false, unavailable(err)
	}
	if !txn.Succeeded {
		return false, nil
	}
	if r.ID != "" {
		e.mu.Lock()
		e.live[e.holdKey(tenantID, r.ID)] = val
		if e.lease != lease {
			e.dirty = true // written under a lease lost meanwhile
		}
		e.mu.Unlock()
	}
	return true, nil
}

// force records a hold without a check: written now if it can be,
// else when the lease is next written back.
func (e *EtcdCounters) force(ctx context.Context, tenantID string, r Record) error {
	k, v := e.holdKey(tenantID, r.ID), encodeHold(r)
	e.mu.Lock()
	e.live[k] = v
	lease := e.lease
	e.mu.Unlock()
	if lease != 0 {
		if _, err := e.cli.Put(ctx, k, v, clientv3.WithLease(lease)); err == nil {
			return nil
		}
	}
	e.mu.Lock()
	e.dirty = true
	e.mu.Unlock()
	return nil
}

// Drop implements Shared. A delete that fails is tried again every
// second while the lease lives (once it is lost the key is gone).
func (e *EtcdCounters) Drop(ctx context.Context, tenantID string, r Record, unexec bool) error {
	ctx, cancel := context.WithTimeout(ctx, e.cfg.Timeout)
	defer cancel()
	var errs []error
	if r.ID != "" {
		k := e.holdKey(tenantID, r.ID)
		e.mu.Lock()
		delete(e.live, k)
		e.mu.Unlock()
		if _, err := e.cli.Delete(ctx, k); err != nil {
			e.mu.Lock()
			e.retries[k] = struct{}{}
			e.mu.Unlock()
			errs = append(errs, unavailable(err))
		}
	}
	if unexec && r.Exec {
		if err := e.unexec(ctx, tenantID, r.Admitted.UnixMilli()); err != nil {
			errs = append(errs, unavailable(err))
		}
	}
	return errors.Join(errs...)
}

// unexec takes one execution at ms out of the tenant's window.
func (e *EtcdCounters) unexec(ctx context.Context, tenantID string, ms int64) error {
	k := e.execKey(tenantID)
	for ctx.Err() == nil {
		resp, err := e.cli.Get(ctx, k)
		if err != nil {
			return err
		}
		if len(resp.Kvs) == 0 {
			return nil
		}
		kv := resp.Kvs[0]
		execs := decodeExecs(kv.Value)
		i := slices.Index(execs, ms)
		if i < 0 {
			return nil
		}
		execs = slices.Delete(execs, i, i+1)
		txn, err := e.cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(k), "=", kv.ModRevision)).
			Then(clientv3.OpPut(k, encodeExecs(execs))).Commit()
		if err != nil {
			return err
		}
		if txn.Succeeded {
			return nil
		}
	}
	return ctx.Err()
}

// retryDrops deletes again the holds whose delete failed.
func (e *EtcdCounters) retryDrops(ctx context.Context) {
	e.mu.Lock()
	keys := make([]string, 0, len(e.retries))
	for k := range e.retries {
		keys = append(keys, k)
	}
	dirty := e.dirty
	lease := e.lease
	e.mu.Unlock()
	if dirty && lease != 0 {
		if err := e.rewrite(ctx, lease); err != nil {
			e.log.Debug("quota: writing holds back", "err", err)
		}
	}
	for _, k := range keys {
		dctx, cancel := context.WithTimeout(ctx, e.cfg.Timeout)
		_, err := e.cli.Delete(dctx, k)
		cancel()
		if err != nil {
			return
		}
		e.mu.Lock()
		delete(e.retries, k)
		e.mu.Unlock()
	}
}

// State implements Shared.
func (e *EtcdCounters) State(ctx context.Context, tenantID string) (SharedState, error) {
	ctx, cancel := context.WithTimeout(ctx, e.cfg.Timeout)
	defer cancel()
	resp, err := e.cli.Get(ctx, e.tenantPrefix(tenantID), clientv3.WithPrefix())
	if err != nil {
		return SharedState{}, unavailable(err)
	}
	st, _ := e.state(tenantID, resp)
	return st, nil
}
