package fleet

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"sort"
	"time"

	"github.com/airlockhq/airlock"
)

// Problem types of placement.
const (
	ProblemNoNode = "fleet-no-node" // no live node offers what the request asks
	ProblemFull   = "fleet-full"    // every node that offers it is full
	problemBusy   = "fleet-busy"    // placements kept racing; placeRetry tries again
	problemEtcd   = "fleet-unavailable"
)

// Bonuses of score: a ready pool member of the image, and the request's
// template on the node's disk. A node that holds the template wins unless
// it is much fuller than another: its free shares lower by more than a
// quarter of their range for a session (0 to 4), a third for a run (0 to
// 3).
const (
	poolBonus     = 0.5
	templateBonus = 1.0
)

// score ranks a node for a request: the free share of its slots (and,
// for a session, of the CPU and memory it bounds), plus a bonus when its
// pool has a ready sandbox of the image and one when it holds the
// request's template. Higher is better.
func score(n Node, used Capacity, req Request) float64 {
	kind, image := req.Kind, req.Image
	free := func(total, taken int64) float64 {
		if total <= 0 {
			return 1 // no bound
		}
		return float64(total-taken) / float64(total)
	}
	// The node's sessions weigh on both kinds (they share its CPUs);
	// a kind's own slots weigh twice.
	s := free(int64(n.Capacity.Sessions), int64(used.Sessions))
	switch kind {
	case KindSession:
		s += free(n.Capacity.MemoryMiB, used.MemoryMiB) + free(n.Capacity.CPUMilli, used.CPUMilli)
		s += free(int64(n.Capacity.Sessions), int64(used.Sessions))
	case KindRun:
		s += 2 * free(int64(n.Capacity.Runs), int64(used.Runs))
	}
	if image != "" && n.Status.PoolReady[image] > 0 {
		s += poolBonus
	}
	if n.holds(req.Template) {
		s += templateBonus
	}
	return s
}

// holds reports whether the node published that it holds the template.
func (n *Node) holds(template string) bool {
	return template != "" && slices.Contains(n.Status.Templates, template)
}

// Place is place for callers outside the HTTP front (benchmarks, tools):
// it reserves req's demand on a node and returns both; Release frees it.
func (f *Fleet) Place(ctx context.Context, req Request) (*Reservation, Node, error) {
	return f.placeRetry(ctx, req, nil)
}

// Release frees a reservation Place made.
func (f *Fleet) Release(ctx context.Context, r *Reservation) { f.release(ctx, r) }

// place chooses a node for req and reserves its demand there: best of K
// live nodes sampled at random among those offering the tier, by score;
// when the sampled ones are full, the rest in score order, so a request
// is refused only when every candidate is full. Nodes in skip are left
// out (a forward to them just failed).
func (f *Fleet) place(ctx context.Context, req Request, skip map[string]bool) (*Reservation, Node, error) {
	d, err := f.cfg.Demand(req)
	if err != nil {
		return nil, Node{}, err
	}
	var cands []Node
	members := f.Members()
	if req.VolumeNode != "" && !slices.ContainsFunc(members, func(n Node) bool { return n.ID == req.VolumeNode }) {
		return nil, Node{}, airlock.Problem(airlock.EUNAVAILABLE, ProblemVolumeUnavailable,
			"volume %s is held by node %s, which is not a live member of the fleet now; sessions mounting it run only there",
			req.Volume, req.VolumeNode).With("node", req.VolumeNode).RetryLater(10 * time.Second)
	}
	for _, n := range members {
		if !skip[n.ID] && n.offers(req.Isolation) && (req.VolumeNode == "" || n.ID == req.VolumeNode) {
			cands = append(cands, n)
		}
	}
	if len(cands) == 0 && req.VolumeNode != "" {
		return nil, Node{}, airlock.Problem(airlock.EUNAVAILABLE, ProblemVolumeUnavailable,
			"volume %s is held by node %s, which cannot take the request now (unreachable, or it lacks isolation %q)",
			req.Volume, req.VolumeNode, req.Isolation).With("node", req.VolumeNode).RetryLater(5 * time.Second)
	}
	if len(cands) == 0 {
		return nil, Node{}, airlock.Problem(airlock.EUNAVAILABLE, ProblemNoNode,
			"no live node of the fleet offers isolation %q", req.Isolation).RetryLater(5 * time.Second)
	}
	rand.Shuffle(len(cands), func(i, j int) { cands[i], cands[j] = cands[j], cands[i] })
	// The nodes that hold the template are always among the sampled.
	sort.SliceStable(cands, func(i, j int) bool { return cands[i].holds(req.Template) && !cands[j].holds(req.Template) })
	type ranked struct {
		n Node
		s float64
	}
	rank := func(ns []Node) []ranked {
		out := make([]ranked, 0, len(ns))
		for _, n := range ns {
			out = append(out, ranked{n, score(n, usage(f.Reservations(n.ID)), req)})
		}
		sort.SliceStable(out, func(i, j int) bool { return out[i].s > out[j].s })
		return out
	}
	k := min(f.cfg.K, len(cands))
	order := append(rank(cands[:k]), rank(cands[k:])...)
	var last error
	for _, c := range order {
		r, err := f.reserve(ctx, c.n, req.Kind, d)
		switch {
		case err == nil:
			return r, c.n, nil
		case errors.Is(err, errFull), errors.Is(err, errNodeGone), errors.Is(err, errContended):
			last = err
			continue
		default:
			// The cause is logged, never sent: callers learn only that
			// the fleet could not place the request now.
			f.log.Warn("fleet: placing a request", "node", c.n.ID, "err", err)
			return nil, Node{}, airlock.Problem(airlock.EUNAVAILABLE, problemEtcd,
				"the fleet could not place the request now").RetryLater(time.Second)
		}
	}
	if errors.Is(last, errFull) || last == nil {
		return nil, Node{}, airlock.Problem(airlock.EUNAVAILABLE, ProblemFull,
			"every node of the fleet that offers isolation %q is full", req.Isolation).RetryLater(5 * time.Second)
	}
	// Contention or nodes leaving: worth another round (placeRetry).
	f.log.Debug("fleet: no node could take a request this round", "err", last)
	return nil, Node{}, airlock.Problem(airlock.EUNAVAILABLE, problemBusy, "no node could take the request now").RetryLater(time.Second)
}
