package quota

import (
	"context"
	"errors"
	"time"

	"github.com/airlockhq/airlock"
)

// sharedRetry is the Retry-After of a refusal because the fleet's
// counters cannot be reached.
const sharedRetry = 5 * time.Second

// admitShared checks a claim against the fleet's counters and records
// its hold there (Config.Shared).
func (l *Ledger) admitShared(tenantID string, h *Hold, now time.Time) error {
	c := h.claim
	rec := Record{ID: airlock.NewID(), Kind: c.Kind, MilliCPU: h.milliCPU, MemoryBytes: c.MemoryBytes,
		Admitted: now, Deadline: c.Deadline, Exec: c.Kind == Run, Force: c.Force}
	err := l.cfg.Shared.Take(context.Background(), tenantID, rec, func(st SharedState) error {
		l.mu.Lock()
		defer l.mu.Unlock()
		return l.check(tenantID, l.tenant(tenantID).withShared(st), h, now)
	})
	if err != nil {
		return l.sharedRefusal(tenantID, err)
	}
	h.rec = rec
	return nil
}

// execShared counts one execution against the fleet's executions per
// minute, or refuses it.
func (l *Ledger) execShared(tenantID string, now time.Time) error {
	err := l.cfg.Shared.Take(context.Background(), tenantID, Record{Admitted: now, Exec: true}, func(st SharedState) error {
		l.mu.Lock()
		defer l.mu.Unlock()
		return l.checkRate(tenantID, l.tenant(tenantID).withShared(st), now)
	})
	if err != nil {
		return l.sharedRefusal(tenantID, err)
	}
	return nil
}

// sharedRefusal counts a quota's refusal, or turns counters that cannot
// be reached into a 503 problem.
func (l *Ledger) sharedRefusal(tenantID string, err error) error {
	if k := RefusalOf(err); k != "" {
		l.refusals.WithLabelValues(string(k)).Inc()
		return err
	}
	l.cfg.Logger.Warn("quota: new work refused: the fleet's counters cannot be reached", "tenant", tenantID, "err", err)
	return sharedProblem(err)
}

// sharedProblem is the 503 of counters that cannot be reached: a node
// cut off from them takes no new work rather than count alone.
func sharedProblem(err error) error {
	if !errors.Is(err, ErrSharedUnavailable) {
		return err
	}
	return airlock.Problem(airlock.EUNAVAILABLE, "quota-unavailable",
		"this node cannot reach the fleet's shared quota counters, so it takes no new work for the tenant until it can; retry (another node may take it)").
		RetryLater(sharedRetry)
}

// withShared is the tenant as the fleet's counters have it: their holds
// and executions in place of this node's, with this node's day counts
// and the unwritten time of its live sandboxes (l.mu held).
func (t *tenant) withShared(st SharedState) *tenant {
	v := &tenant{holds: make(map[*Hold]struct{}, len(t.holds)+len(st.Holds)), days: t.days, runAvg: t.runAvg}
	for h := range t.holds {
		if h.started {
			v.holds[h] = struct{}{}
		}
	}
	for _, r := range st.Holds {
		if r.Kind == Session {
			v.sessions++
		} else {
			v.runs++
		}
		v.milliCPU += r.MilliCPU
		v.memory += r.MemoryBytes
		v.holds[&Hold{claim: Claim{Kind: r.Kind, Deadline: r.Deadline}, admitted: r.Admitted}] = struct{}{}
	}
	v.execs = append([]time.Time(nil), st.Execs...)
	return v
}
