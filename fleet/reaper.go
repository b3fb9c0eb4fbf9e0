package fleet

import (
	"context"
	"time"

	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/airlockhq/airlock"
)

// EndNodeLost is the end reason of a session whose node was lost.
const EndNodeLost = airlock.EndNodeLost

// startReaper campaigns, under the node's etcd session, to be the one
// node that marks lost nodes' sessions; the campaign ends with the
// session (a lost lease), and the next join starts another.
func (f *Fleet) startReaper(sess *concurrency.Session) {
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		ctx, cancel := context.WithCancel(f.ctx)
		defer cancel()
		go func() {
			select {
			case <-sess.Done():
			case <-ctx.Done():
			}
			cancel()
		}()
		e := concurrency.NewElection(sess, f.cfg.electionPrefix())
		if err := e.Campaign(ctx, f.cfg.NodeID); err != nil {
			return
		}
		f.log.Info("fleet: this node reaps lost nodes", "node", f.cfg.NodeID)
		defer func() {
			rctx, rcancel := context.WithTimeout(context.WithoutCancel(f.ctx), 2*time.Second)
			defer rcancel()
			_ = e.Resign(rctx)
		}()
		tick := time.NewTicker(f.cfg.ReapEvery)
		defer tick.Stop()
		for {
			f.reap(ctx)
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			case <-f.nodeGone:
			}
		}
	}()
}

// reap marks lost every node that has unfinished sessions in the store
// and is not a member. Sessions of no node ("" : made without a fleet)
// are left alone.
func (f *Fleet) reap(ctx context.Context) {
	if f.nodes.wait(ctx) != nil {
		return
	}
	nodes, err := f.cfg.Store.LiveSessionNodes(ctx)
	if err != nil {
		f.log.Warn("fleet: reaper: listing the nodes of live sessions", "err", err)
		return
	}
	for _, id := range nodes {
		if id == "" {
			continue
		}
		if _, ok := f.member(id); ok {
			continue
		}
		// The cache may lag a node that joined a moment ago: ask etcd.
		gctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		resp, err := f.cli.Get(gctx, f.cfg.nodeKey(id))
		cancel()
		if err != nil || len(resp.Kvs) > 0 {
			continue
		}
		detail := "node " + id + " left the fleet (its lease expired) and its sandboxes with it"
		s, e, err := f.cfg.Store.MarkNodeLost(ctx, id, detail)
		if err != nil {
			f.log.Warn("fleet: reaper: marking a lost node's sessions", "node", id, "err", err)
			continue
		}
		if s+e > 0 {
			f.log.Warn("fleet: node lost", "node", id, "sessions_lost", s, "runs_failed", e)
			if f.onLost != nil {
				f.onLost(id, s, e)
			}
		}
	}
}
