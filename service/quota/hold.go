package quota

import (
	"context"
	"sync"
	"time"
)

// Kind is what a hold is for.
type Kind int

const (
	// Run is a one-shot run: it counts against runs and executions per
	// minute.
	Run Kind = iota
	// Session is a session's sandbox: it counts against sessions.
	Session
)

// Claim is what one sandbox takes of its tenant's quotas.
type Claim struct {
	Kind Kind
	// CPUs and MemoryBytes are the sandbox's limits.
	CPUs        float64
	MemoryBytes int64
	// Network says the sandbox will have a network (or the credential
	// broker): it is refused once the day's egress bytes are used up.
	Network bool
	// Deadline is when the sandbox ends at the latest (a run's timeout,
	// a session's expiry); zero if unknown. It shapes Retry-After.
	Deadline time.Time
	// Force counts the claim whatever the limits say: a session that
	// lived before a restart is taken back, never refused.
	Force bool
}

// Hold is a claim taken: its share of the concurrent quotas is held
// until Release, and the time between Start and Release counts as the
// sandbox's.
type Hold struct {
	l        *Ledger
	tenantID string
	claim    Claim
	milliCPU int64
	admitted time.Time
	exec     time.Time // the run's place in the minute's window
	rec      Record    // as the fleet's shared counters have it (Config.Shared)

	// Under l.mu:
	started bool
	counted time.Time // the sandbox's time is counted up to here

	once sync.Once
}

// Admit takes a claim's share of the tenant's quotas, or refuses it with
// a 429 problem naming the first quota it would go past; a refused claim
// takes nothing.
func (l *Ledger) Admit(tenantID string, c Claim) (*Hold, error) {
	now := l.cfg.Now()
	h := &Hold{l: l, tenantID: tenantID, claim: c, milliCPU: milli(c.CPUs), admitted: now}
	if l.cfg.Shared != nil {
		if err := l.admitShared(tenantID, h, now); err != nil {
			return nil, err
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	t := l.tenant(tenantID)
	if !c.Force && l.cfg.Shared == nil {
		if err := l.check(tenantID, t, h, now); err != nil {
			l.refusals.WithLabelValues(string(RefusalOf(err))).Inc()
			return nil, err
		}
	}
	switch c.Kind {
	case Session:
		t.sessions++
	default:
		t.runs++
		t.pruneExecs(now)
		t.execs = append(t.execs, now)
		h.exec = now
	}
	t.milliCPU += h.milliCPU
	t.memory += c.MemoryBytes
	t.holds[h] = struct{}{}
	return h, nil
}

// check refuses a hold past a quota (l.mu held).
func (l *Ledger) check(tenantID string, t *tenant, h *Hold, now time.Time) error {
	c := h.claim
	over := func(k Key, used, asked int64) (int64, bool) {
		limit, _ := l.limit(tenantID, k)
		return limit, limit >= 0 && used+asked > limit
	}
	sameKind := func(o *Hold) bool { return o.claim.Kind == c.Kind }
	anyHold := func(*Hold) bool { return true }
	if c.Kind == Session {
		if limit, bad := over(Sessions, int64(t.sessions), 1); bad {
			return refuse(Refusal{Quota: Sessions, Limit: limit, Used: int64(t.sessions)}, t.soonestEnd(now, sameKind))
		}
	} else {
		if limit, bad := over(Runs, int64(t.runs), 1); bad {
			return refuse(Refusal{Quota: Runs, Limit: limit, Used: int64(t.runs)}, t.soonestEnd(now, sameKind))
		}
	}
	if limit, bad := over(VCPU, t.milliCPU, h.milliCPU); bad {
		return refuse(Refusal{Quota: VCPU, Limit: limit, Used: t.milliCPU, Requested: h.milliCPU}, t.soonestEnd(now, anyHold))
	}
	if limit, bad := over(Memory, t.memory, c.MemoryBytes); bad {
		return refuse(Refusal{Quota: Memory, Limit: limit, Used: t.memory, Requested: c.MemoryBytes}, t.soonestEnd(now, anyHold))
	}
	if c.Kind == Run {
		if err := l.checkRate(tenantID, t, now); err != nil {
			return err
		}
	}
	midnight := nextMidnight(now)
	if limit, _ := l.limit(tenantID, SandboxSecondsPerDay); limit >= 0 {
		if used := t.sandboxMillis(now) / 1000; used >= limit {
			return refuse(Refusal{Quota: SandboxSecondsPerDay, Limit: limit, Used: used, ResetsAt: midnight}, midnight.Sub(now))
		}
	}
	if c.Network {
		if limit, _ := l.limit(tenantID, EgressBytesPerDay); limit >= 0 {
			if used := t.egressBytes(now); used >= limit {
				return refuse(Refusal{Quota: EgressBytesPerDay, Limit: limit, Used: used, ResetsAt: midnight}, midnight.Sub(now))
			}
		}
	}
	return nil
}

// expectedEnd is when the hold's sandbox is expected to end: a run after
// its tenant's recent run time (at most at its deadline), a session at
// its deadline.
func (h *Hold) expectedEnd(runAvg time.Duration) time.Time {
	deadline := h.claim.Deadline
	if h.claim.Kind == Run && runAvg > 0 {
		if end := h.admitted.Add(runAvg); deadline.IsZero() || end.Before(deadline) {
			return end
		}
	}
	if deadline.IsZero() {
		return h.admitted.Add(maxRetry)
	}
	return deadline
}

// Start says the hold's sandbox exists from now: its time counts.
func (h *Hold) Start() {
	if h == nil {
		return
	}
	now := h.l.cfg.Now()
	h.l.mu.Lock()
	defer h.l.mu.Unlock()
	if _, live := h.l.tenants[h.tenantID].holds[h]; live && !h.started {
		h.started, h.counted = true, now
	}
}

// Release gives the hold's share back. A started hold's sandbox time is
// counted up to now; a hold never started also gives back its place in
// the minute's window (the run never ran). Calls after the first do
// nothing.
func (h *Hold) Release() {
	if h == nil {
		return
	}
	h.once.Do(func() {
		now := h.l.cfg.Now()
		l := h.l
		l.mu.Lock()
		t := l.tenants[h.tenantID]
		delete(t.holds, h)
		switch h.claim.Kind {
		case Session:
			t.sessions--
		default:
			t.runs--
		}
		t.milliCPU -= h.milliCPU
		t.memory -= h.claim.MemoryBytes
		started := h.started
		if started {
			t.accrue(h, now)
			if h.claim.Kind == Run {
				took := now.Sub(h.admitted)
				if t.runAvg == 0 {
					t.runAvg = took
				} else {
					t.runAvg = (3*t.runAvg + took) / 4
				}
			}
		} else if !h.exec.IsZero() {
			for i, at := range t.execs {
				if at.Equal(h.exec) {
					t.execs = append(t.execs[:i], t.execs[i+1:]...)
					break
				}
			}
		}
		l.mu.Unlock()
		if h.rec.ID != "" {
			ctx := context.Background()
			if err := l.cfg.Shared.Drop(ctx, h.tenantID, h.rec, !started); err != nil {
				l.cfg.Logger.Warn("quota: giving a hold back to the fleet's counters (tried again)", "tenant", h.tenantID, "err", err)
			}
		}
		if started {
			select {
			case l.nudge <- struct{}{}:
			default:
			}
		}
	})
}

// accrue adds a started hold's time since it was last counted to the
// pending counters of the days it spans (l.mu held).
func (t *tenant) accrue(h *Hold, now time.Time) {
	from := h.counted
	for from.Before(now) {
		end := nextMidnight(from)
		if end.After(now) {
			end = now
		}
		t.day(Day(from)).pending.SandboxMillis += end.Sub(from).Milliseconds()
		from = end
	}
	h.counted = now
}
