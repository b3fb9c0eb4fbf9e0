package fleet

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"reflect"
	"strconv"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/airlockhq/airlock"
)

// Node is a member's record under nodes/<id>, kept under its lease.
type Node struct {
	ID          string    `json:"id"`
	Addr        string    `json:"addr"`
	Incarnation string    `json:"incarnation"` // new at every join
	Lease       int64     `json:"lease"`
	Tiers       []string  `json:"tiers"`
	Capacity    Capacity  `json:"capacity"`
	Status      Status    `json:"status"`
	Joined      time.Time `json:"joined"`
}

// offers reports whether the node has a backend at or above an
// isolation tier, as airlock.ChooseBackend picks ("" or an unknown tier:
// any node, whose API then answers for it).
func (n *Node) offers(tier string) bool {
	want := airlock.Isolation(tier)
	if !want.Valid() {
		return true
	}
	for _, t := range n.Tiers {
		if airlock.Isolation(t).AtLeast(want) {
			return true
		}
	}
	return false
}

// join takes a lease (the one a previous run of this node left, if it is
// still alive) and writes this node's record under it.
func (f *Fleet) join(ctx context.Context) (*concurrency.Session, Node, error) {
	ttl := int(f.cfg.LeaseTTL / time.Second)
	id, ok := f.oldLease(ctx)
	if !ok {
		// Granted here, within ctx; the session below only keeps it.
		gctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		g, err := f.cli.Grant(gctx, int64(ttl))
		cancel()
		if err != nil {
			return nil, Node{}, err
		}
		id = g.ID
	}
	sess, err := concurrency.NewSession(f.cli, concurrency.WithTTL(ttl), concurrency.WithContext(f.ctx), concurrency.WithLease(id))
	if err != nil {
		return nil, Node{}, err
	}
	var inc [8]byte
	_, _ = rand.Read(inc[:])
	n := Node{
		ID: f.cfg.NodeID, Addr: f.cfg.Addr, Incarnation: hex.EncodeToString(inc[:]), Lease: int64(sess.Lease()),
		Tiers: f.cfg.Tiers, Capacity: f.cfg.Capacity, Status: f.cfg.Local.Status(ctx), Joined: time.Now().UTC(),
	}
	if err := f.putNode(ctx, n); err != nil {
		sess.Orphan()
		return nil, Node{}, err
	}
	if f.cfg.LeaseFile != "" {
		if err := os.WriteFile(f.cfg.LeaseFile, []byte(strconv.FormatInt(n.Lease, 16)+"\n"), 0o600); err != nil {
			f.log.Warn("fleet: keeping the lease ID for the next start", "err", err)
		}
	}
	f.log.Info("fleet: joined", "node", n.ID, "lease", strconv.FormatInt(n.Lease, 16), "incarnation", n.Incarnation, "ttl", f.cfg.LeaseTTL)
	return sess, n, nil
}

// oldLease returns the lease a previous run left in LeaseFile if etcd
// still has it: a restart within the TTL keeps the node's mappings.
func (f *Fleet) oldLease(ctx context.Context) (clientv3.LeaseID, bool) {
	if f.cfg.LeaseFile == "" {
		return 0, false
	}
	b, err := os.ReadFile(f.cfg.LeaseFile)
	if err != nil {
		return 0, false
	}
	v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 16, 64)
	if err != nil || v <= 0 {
		return 0, false
	}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	ttl, err := f.cli.TimeToLive(cctx, clientv3.LeaseID(v))
	if err != nil || ttl.TTL <= 0 {
		return 0, false
	}
	// The record must still be this node's under that lease.
	resp, err := f.cli.Get(cctx, f.cfg.nodeKey(f.cfg.NodeID))
	if err != nil || len(resp.Kvs) != 1 || resp.Kvs[0].Lease != v {
		return 0, false
	}
	return clientv3.LeaseID(v), true
}

func (f *Fleet) putNode(ctx context.Context, n Node) error {
	b, err := json.Marshal(n)
	if err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, err = f.cli.Put(cctx, f.cfg.nodeKey(n.ID), string(b), clientv3.WithLease(clientv3.LeaseID(n.Lease)))
	return err
}

// publish writes this node's load into its record when it changed.
func (f *Fleet) publish(ctx context.Context) {
	f.mu.Lock()
	n, live := f.self, f.sess != nil
	f.mu.Unlock()
	if !live {
		return
	}
	st := f.cfg.Local.Status(ctx)
	if reflect.DeepEqual(st, n.Status) {
		return
	}
	n.Status = st
	if err := f.putNode(ctx, n); err != nil {
		f.log.Debug("fleet: publishing the node's load", "err", err)
		return
	}
	f.mu.Lock()
	if f.self.Incarnation == n.Incarnation {
		f.self.Status = st
	}
	f.mu.Unlock()
}

// Members returns the live nodes as the watch cache has them.
func (f *Fleet) Members() []Node {
	var out []Node
	f.nodes.each(f.cfg.nodesPrefix(), func(_ string, v []byte) {
		var n Node
		if json.Unmarshal(v, &n) == nil {
			out = append(out, n)
		}
	})
	return out
}

func (f *Fleet) member(id string) (Node, bool) {
	v, ok := f.nodes.get(f.cfg.nodeKey(id))
	if !ok {
		return Node{}, false
	}
	var n Node
	return n, json.Unmarshal(v, &n) == nil
}

// keepMembership holds this node's lease; when the lease is lost (etcd
// unreachable for longer than the TTL, or the lease revoked) it destroys
// the sessions the fleet no longer assigns to this node and joins again.
func (f *Fleet) keepMembership() {
	defer f.wg.Done()
	for {
		f.mu.Lock()
		sess := f.sess
		f.mu.Unlock()
		if sess != nil {
			select {
			case <-f.ctx.Done():
				return
			case <-sess.Done():
			}
			if f.ctx.Err() != nil {
				return
			}
			f.log.Warn("fleet: this node's lease is lost; its sessions are no longer the fleet's", "node", f.cfg.NodeID)
			f.mu.Lock()
			f.sess = nil
			f.mu.Unlock()
			f.abandonAll(f.ctx, "this node lost its fleet membership (lease expired)")
		}
		backoff := 100 * time.Millisecond
		for {
			s, n, err := f.join(f.ctx)
			if err == nil {
				f.mu.Lock()
				f.sess, f.self = s, n
				f.mu.Unlock()
				f.startReaper(s)
				break
			}
			if f.ctx.Err() != nil {
				return
			}
			f.log.Warn("fleet: joining again", "err", err)
			select {
			case <-f.ctx.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, 2*time.Second)
		}
	}
}

// abandonAll destroys every session this node holds (they were marked
// lost, or will be, by the reaper).
func (f *Fleet) abandonAll(ctx context.Context, detail string) {
	ids, err := f.cfg.Local.Held(ctx)
	if err != nil {
		f.log.Error("fleet: listing this node's sessions to end them", "err", err)
		return
	}
	var errs []error
	for _, id := range ids {
		if err := f.cfg.Local.Abandon(ctx, id, detail); err != nil {
			errs = append(errs, err)
		}
	}
	if len(ids) > 0 {
		f.log.Warn("fleet: ended the sessions of a lost membership", "sessions", len(ids), "err", errors.Join(errs...))
	}
}
