package quota

import (
	"context"
	"math"

	"github.com/airlockhq/airlock"
)

// Flush counts the time of live sandboxes up to now and writes every
// counter not written yet. A write that fails keeps them for the next.
func (l *Ledger) Flush(ctx context.Context) error {
	l.flushMu.Lock()
	defer l.flushMu.Unlock()
	now := l.cfg.Now()
	today := Day(now)
	var deltas []airlock.UsageDelta
	l.mu.Lock()
	for id, t := range l.tenants {
		for h := range t.holds {
			if h.started {
				t.accrue(h, now)
			}
		}
		for day, d := range t.days {
			if d.pending != (airlock.DailyUsage{}) {
				deltas = append(deltas, airlock.UsageDelta{TenantID: id, Day: day, DailyUsage: d.pending})
				d.stored.SandboxMillis += d.pending.SandboxMillis
				d.stored.EgressBytes += d.pending.EgressBytes
				d.pending = airlock.DailyUsage{}
			}
			if day < today && d.pending == (airlock.DailyUsage{}) && l.cfg.Store != nil {
				// A past day written (or about to be): checks read today only.
				defer func(t *tenant, day string) { l.forgetDay(t, day) }(t, day)
			}
		}
	}
	l.mu.Unlock()
	if l.cfg.Store == nil || (len(deltas) == 0 && l.cfg.Shared == nil) {
		return nil
	}
	var err error
	if len(deltas) > 0 {
		err = l.cfg.Store.AddUsage(ctx, deltas)
	}
	if err == nil && l.cfg.Shared != nil {
		return l.readBack(ctx, today)
	}
	if err != nil {
		// Not written: count them as pending again.
		l.mu.Lock()
		for _, d := range deltas {
			c := l.tenant(d.TenantID).day(d.Day)
			c.stored.SandboxMillis -= d.SandboxMillis
			c.stored.EgressBytes -= d.EgressBytes
			c.pending.SandboxMillis += d.SandboxMillis
			c.pending.EgressBytes += d.EgressBytes
		}
		l.mu.Unlock()
	}
	return err
}

// readBack sets today's written counters to the store's, which hold
// every node's writes (l.flushMu held, after this node's own writes).
func (l *Ledger) readBack(ctx context.Context, today string) error {
	usage, err := l.cfg.Store.DailyUsage(ctx, today)
	if err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for id, t := range l.tenants {
		if _, ok := usage[id]; !ok {
			if d := t.days[today]; d != nil {
				d.stored = airlock.DailyUsage{}
			}
		}
	}
	for id, u := range usage {
		l.tenant(id).day(today).stored = u
	}
	return nil
}

// forgetDay drops a past day's counters once nothing of them is pending.
func (l *Ledger) forgetDay(t *tenant, day string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if d := t.days[day]; d != nil && d.pending == (airlock.DailyUsage{}) {
		delete(t.days, day)
	}
}

// ChargeEgress counts n bytes the tenant's sandboxes moved through the
// egress proxy and returns what the tenant may still move today
// (math.MaxInt64 without a limit; 0 or less once the quota is used up).
// Charging 0 asks without counting.
func (l *Ledger) ChargeEgress(tenantID string, n int64) int64 {
	now := l.cfg.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	t := l.tenant(tenantID)
	d := t.day(Day(now))
	if n > 0 {
		d.pending.EgressBytes += n
	}
	limit, _ := l.limit(tenantID, EgressBytesPerDay)
	if limit < 0 {
		return math.MaxInt64
	}
	return limit - d.total().EgressBytes
}
