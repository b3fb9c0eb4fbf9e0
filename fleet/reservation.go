package fleet

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	mrand "math/rand/v2"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Reservation is capacity taken on a node for one session or run, kept
// under alloc/<node>/<id> with the node's lease: a node that is gone
// holds nothing.
type Reservation struct {
	ID        string    `json:"id"`
	Node      string    `json:"node"`
	Kind      Kind      `json:"kind"`
	CPUMilli  int64     `json:"cpu_milli"`
	MemoryMiB int64     `json:"memory_mib"`
	PlacedBy  string    `json:"placed_by"`
	Created   time.Time `json:"created"`
}

// Errors of a reservation.
var (
	errFull      = errors.New("fleet: the node has no room")
	errNodeGone  = errors.New("fleet: the node left")
	errContended = errors.New("fleet: reservations kept changing")
)

// maxReserveTries bounds the reads and transactions of one reservation
// when other placers keep reserving on the same node.
const maxReserveTries = 32

func newID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// usage sums reservations: the counts of each kind, and the CPU and
// memory of the sessions (runs have slots of their own, see Capacity).
func usage(rs []Reservation) Capacity {
	var u Capacity
	for _, r := range rs {
		switch r.Kind {
		case KindSession:
			u.Sessions++
			u.CPUMilli += r.CPUMilli
			u.MemoryMiB += r.MemoryMiB
		case KindRun:
			u.Runs++
		}
	}
	return u
}

// fits reports whether a reservation of kind and d fits beside used: a
// run needs one of the node's run slots; a session one of its session
// slots and, where the node bounds them, its CPU and memory.
func fits(c, used Capacity, kind Kind, d Demand) bool {
	switch kind {
	case KindSession:
		if c.CPUMilli > 0 && used.CPUMilli+d.CPUMilli > c.CPUMilli {
			return false
		}
		if c.MemoryMiB > 0 && used.MemoryMiB+d.MemoryMiB > c.MemoryMiB {
			return false
		}
		return used.Sessions+1 <= c.Sessions
	case KindRun:
		return used.Runs+1 <= c.Runs
	}
	return false
}

// reserve takes d on node n, or answers errFull. It reads the node's
// reservations and writes the new one in a transaction that holds only
// if no reservation of the node changed since the read (a mod-revision
// compare over the node's whole alloc range) and the node still holds
// the lease the placer saw: two placers racing for the last slot of a
// node cannot both win.
func (f *Fleet) reserve(ctx context.Context, n Node, kind Kind, d Demand) (*Reservation, error) {
	r := &Reservation{ID: newID(), Node: n.ID, Kind: kind, CPUMilli: d.CPUMilli, MemoryMiB: d.MemoryMiB,
		PlacedBy: f.cfg.NodeID, Created: time.Now().UTC()}
	val, err := json.Marshal(r)
	if err != nil {
		return nil, err
	}
	prefix := f.cfg.allocPrefix(n.ID)
	for try := 0; try < maxReserveTries; try++ {
		resp, err := f.cli.Get(ctx, prefix, clientv3.WithPrefix())
		if err != nil {
			return nil, err
		}
		rs := make([]Reservation, 0, len(resp.Kvs))
		for _, kv := range resp.Kvs {
			var x Reservation
			if json.Unmarshal(kv.Value, &x) == nil {
				rs = append(rs, x)
			}
		}
		if !fits(n.Capacity, usage(rs), kind, d) {
			return nil, errFull
		}
		rev := resp.Header.Revision
		txn, err := f.cli.Txn(ctx).If(
			clientv3.Compare(clientv3.ModRevision(prefix).WithPrefix(), "<", rev+1),
			clientv3.Compare(clientv3.LeaseValue(f.cfg.nodeKey(n.ID)), "=", clientv3.LeaseID(n.Lease)),
		).Then(
			clientv3.OpPut(f.cfg.allocKey(n.ID, r.ID), string(val), clientv3.WithLease(clientv3.LeaseID(n.Lease))),
		).Else(
			clientv3.OpGet(f.cfg.nodeKey(n.ID)),
		).Commit()
		if err != nil {
			return nil, err
		}
		if txn.Succeeded {
			return r, nil
		}
		if gr := txn.Responses[0].GetResponseRange(); gr == nil || len(gr.Kvs) == 0 || gr.Kvs[0].Lease != n.Lease {
			return nil, errNodeGone
		}
		// Another reservation of the node came in between: read again,
		// after a short random pause so that racing placers spread out.
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Duration(mrand.Int64N(int64(time.Millisecond) * int64(try+1)))):
		}
	}
	return nil, errContended
}

// release frees a reservation; releasing one twice is harmless.
func (f *Fleet) release(ctx context.Context, r *Reservation) {
	if r == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if _, err := f.cli.Delete(ctx, f.cfg.allocKey(r.Node, r.ID)); err != nil {
		f.log.Warn("fleet: releasing a reservation (the sweep frees it later)", "node", r.Node, "id", r.ID, "err", err)
	}
}

// Reservations returns the reservations of node as the watch cache has
// them.
func (f *Fleet) Reservations(node string) []Reservation {
	var out []Reservation
	f.allocs.each(f.cfg.allocPrefix(node), func(_ string, v []byte) {
		var r Reservation
		if json.Unmarshal(v, &r) == nil {
			out = append(out, r)
		}
	})
	return out
}
