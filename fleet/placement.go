package fleet

import (
	"context"
	"errors"
	"math/rand/v2"
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

// score ranks a node for a request: the free share of its slots (and,
// for a session, of the CPU and memory it bounds), plus a bonus when its pool has a ready sandbox
// of the image. Higher is better.
func score(n Node, used Capacity, kind Kind, image string) float64 {
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
		s += 0.5
	}
	return s
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
	for _, n := range f.Members() {
		if !skip[n.ID] && n.offers(req.Isolation) {
			cands = append(cands, n)
		}
	}
	if len(cands) == 0 {
		return nil, Node{}, airlock.Problem(airlock.EUNAVAILABLE, ProblemNoNode,
			"no live node of the fleet offers isolation %q", req.Isolation).RetryLater(5 * time.Second)
	}
	rand.Shuffle(len(cands), func(i, j int) { cands[i], cands[j] = cands[j], cands[i] })
	type ranked struct {
		n Node
		s float64
	}
	rank := func(ns []Node) []ranked {
		out := make([]ranked, 0, len(ns))
		for _, n := range ns {
			out = append(out, ranked{n, score(n, usage(f.Reservations(n.ID)), req.Kind, req.Image)})
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
