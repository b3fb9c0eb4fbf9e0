package fleet

import (
	"context"
	"encoding/json"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// binding is the value of sessions/<id>: the node holding the session
// and the reservation it took there.
type binding struct {
	Node  string `json:"node"`
	Alloc string `json:"alloc,omitempty"`
}

// bind records that this node holds session id (under this node's
// lease, so the mapping goes with the node).
func (f *Fleet) bind(ctx context.Context, id, alloc string) error {
	f.mu.Lock()
	lease := f.self.Lease
	f.mu.Unlock()
	b, _ := json.Marshal(binding{Node: f.cfg.NodeID, Alloc: alloc})
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_, err := f.cli.Put(ctx, f.cfg.sessionKey(id), string(b), clientv3.WithLease(clientv3.LeaseID(lease)))
	return err
}

// unbind drops a session's mapping and its reservation.
func (f *Fleet) unbind(ctx context.Context, id string, b binding) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	ops := []clientv3.Op{clientv3.OpDelete(f.cfg.sessionKey(id))}
	if b.Alloc != "" {
		ops = append(ops, clientv3.OpDelete(f.cfg.allocKey(b.Node, b.Alloc)))
	}
	if _, err := f.cli.Txn(ctx).Then(ops...).Commit(); err != nil {
		f.log.Warn("fleet: dropping an ended session's mapping (the sweep does it later)", "session", id, "err", err)
	}
}

// Owner returns the node that holds session id: from the watch cache,
// and only when the cache does not know it (a session made a moment ago
// through another node) from one read of etcd.
func (f *Fleet) Owner(ctx context.Context, id string) (string, bool) {
	if v, ok := f.sessions.get(f.cfg.sessionKey(id)); ok {
		var b binding
		if json.Unmarshal(v, &b) == nil {
			return b.Node, true
		}
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	resp, err := f.cli.Get(ctx, f.cfg.sessionKey(id))
	if err != nil || len(resp.Kvs) == 0 {
		return "", false
	}
	var b binding
	if json.Unmarshal(resp.Kvs[0].Value, &b) != nil {
		return "", false
	}
	return b.Node, true
}

// sweep frees what this node's ended sessions and finished or abandoned
// runs still hold: the mapping and reservation of every session it no
// longer has, reservations no session took within PendingTTL, and run
// reservations older than RunTTL.
func (f *Fleet) sweep(ctx context.Context) {
	held, err := f.cfg.Local.Held(ctx)
	if err != nil {
		f.log.Debug("fleet: sweep: listing sessions", "err", err)
		return
	}
	have := make(map[string]bool, len(held))
	for _, id := range held {
		have[id] = true
	}
	bound := map[string]bool{}
	type gone struct {
		id string
		b  binding
	}
	var ended []gone
	f.sessions.each(f.cfg.sessionsPrefix(), func(k string, v []byte) {
		var b binding
		if json.Unmarshal(v, &b) != nil || b.Node != f.cfg.NodeID {
			return
		}
		id := lastSegment(k)
		if b.Alloc != "" {
			bound[b.Alloc] = true
		}
		if !have[id] {
			ended = append(ended, gone{id, b})
		}
	})
	if len(ended) > 0 {
		// Read again: a session made and bound after the first read is
		// in this one, so only what ended is unbound.
		again, err := f.cfg.Local.Held(ctx)
		if err != nil {
			return
		}
		still := make(map[string]bool, len(again))
		for _, id := range again {
			still[id] = true
		}
		for _, g := range ended {
			if !still[g.id] {
				f.unbind(ctx, g.id, g.b)
			}
		}
	}
	now := time.Now()
	for _, r := range f.Reservations(f.cfg.NodeID) {
		stale := (r.Kind == KindSession && !bound[r.ID] && !f.pending(r.ID) && now.Sub(r.Created) > f.cfg.PendingTTL) ||
			(r.Kind == KindRun && now.Sub(r.Created) > f.cfg.RunTTL)
		if stale {
			f.release(ctx, &r)
		}
	}
}

// pending reports whether a session creation holding reservation id is
// being served on this node now.
func (f *Fleet) pending(id string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.inflight[id]
}

// Adopt maps to this node every session it holds that has no mapping:
// those it took back at a restart after its old lease had expired with
// no reaper to mark them lost (the whole fleet was down). Call it once,
// after the node recovered its sessions and before it serves.
func (f *Fleet) Adopt(ctx context.Context) error {
	held, err := f.cfg.Local.Held(ctx)
	if err != nil {
		return err
	}
	n := 0
	for _, id := range held {
		if v, ok := f.sessions.get(f.cfg.sessionKey(id)); ok {
			var b binding
			if json.Unmarshal(v, &b) == nil && b.Node == f.cfg.NodeID {
				continue
			}
		}
		if err := f.bind(ctx, id, f.selfReserve(ctx, KindSession)); err != nil {
			return err
		}
		n++
	}
	if n > 0 {
		f.log.Info("fleet: mapped the sessions taken back at start", "sessions", n)
	}
	return nil
}
