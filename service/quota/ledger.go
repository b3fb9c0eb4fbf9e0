package quota

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/airlockhq/airlock"
)

// Config configures a Ledger.
type Config struct {
	// Defaults are the operator's limits; a quota not in it has none
	// unless a tenant's override sets one.
	Defaults Limits
	// Store keeps the overrides and the daily counters; nil keeps the
	// counters in memory only (lost at a restart) and knows no overrides.
	Store airlock.QuotaStore
	// FlushInterval is how often the day's counters are written and the
	// overrides read again (10 s). It bounds what a crash loses: the time
	// live sandboxes existed and the egress bytes they moved since the
	// last write. A sandbox that ends is written within FlushGap.
	FlushInterval time.Duration
	// FlushGap is the least time between two writes (1 s): ends that
	// come faster are written together.
	FlushGap time.Duration
	// Shared, if set, keeps the concurrent quotas' holds and the
	// executions per minute for the whole fleet (EtcdCounters); nil keeps
	// them in this ledger's memory, for one node alone. With it the day's
	// counters are also read back from the store at every flush, so each
	// node sees the others' use within FlushInterval.
	Shared Shared
	// Metrics registers airlock_quota_refusals_total{quota}; nil keeps it
	// in a private registry.
	Metrics prometheus.Registerer
	// Stored, if set, reads the tenant's use of a quota of window
	// "stored" (volume_bytes), which its owner counts, for Usage.
	Stored func(ctx context.Context, tenantID string, k Key) (int64, error)
	Logger *slog.Logger
	Now    func() time.Time
}

// Validate fills defaults and checks the config.
func (c *Config) Validate() error {
	if err := c.Defaults.Validate(); err != nil {
		return fmt.Errorf("quota: defaults: %w", err)
	}
	if c.FlushInterval <= 0 {
		c.FlushInterval = 10 * time.Second
	}
	if c.FlushGap <= 0 {
		c.FlushGap = time.Second
	}
	if c.FlushGap > c.FlushInterval {
		c.FlushGap = c.FlushInterval
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Metrics == nil {
		c.Metrics = prometheus.NewRegistry()
	}
	return nil
}

// Ledger keeps the quotas of a node's tenants. It is safe for concurrent
// use.
type Ledger struct {
	cfg      Config
	refusals *prometheus.CounterVec

	mu        sync.Mutex
	overrides map[string]map[Key]int64
	tenants   map[string]*tenant

	flushMu sync.Mutex    // one write at a time
	nudge   chan struct{} // a sandbox ended: write soon
	stop    chan struct{}
	done    chan struct{}
	runOnce sync.Once
	endOnce sync.Once
}

// tenant is what the ledger knows of one tenant.
type tenant struct {
	sessions, runs int
	milliCPU       int64
	memory         int64
	holds          map[*Hold]struct{}
	execs          []time.Time // started in the last minute, oldest first
	days           map[string]*dayCount
	runAvg         time.Duration // recent one-shot run time (moving average); 0 until one ended
}

// dayCount is one tenant's counters of one UTC day: what the store has
// (or is being written) and what is not written yet.
type dayCount struct {
	stored  airlock.DailyUsage
	pending airlock.DailyUsage
}

func (d *dayCount) total() airlock.DailyUsage {
	return airlock.DailyUsage{
		SandboxMillis: d.stored.SandboxMillis + d.pending.SandboxMillis,
		EgressBytes:   d.stored.EgressBytes + d.pending.EgressBytes,
	}
}

// New returns a ledger; Start reads the store and starts the writes.
func New(cfg Config) (*Ledger, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	defaults := Limits{}
	for k, v := range cfg.Defaults {
		defaults[k] = v
	}
	cfg.Defaults = defaults
	refusals := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "airlock_quota_refusals_total",
		Help: "Requests refused because a tenant was over a quota, by quota.",
	}, []string{"quota"})
	if err := cfg.Metrics.Register(refusals); err != nil {
		return nil, fmt.Errorf("quota: metrics: %w", err)
	}
	for _, k := range Keys() {
		refusals.WithLabelValues(string(k))
	}
	return &Ledger{
		cfg:       cfg,
		refusals:  refusals,
		overrides: map[string]map[Key]int64{},
		tenants:   map[string]*tenant{},
		nudge:     make(chan struct{}, 1),
		stop:      make(chan struct{}),
		done:      make(chan struct{}),
	}, nil
}

// Day is the UTC day of t as the store names it.
func Day(t time.Time) string { return t.UTC().Format(time.DateOnly) }

// nextMidnight is the start of the UTC day after t's.
func nextMidnight(t time.Time) time.Time {
	y, m, d := t.UTC().Date()
	return time.Date(y, m, d+1, 0, 0, 0, 0, time.UTC)
}

// Start reads the overrides and today's counters from the store, then
// writes the counters behind until Close.
func (l *Ledger) Start(ctx context.Context) error {
	if err := l.Reload(ctx); err != nil {
		return err
	}
	if l.cfg.Store != nil {
		day := Day(l.cfg.Now())
		usage, err := l.cfg.Store.DailyUsage(ctx, day)
		if err != nil {
			return fmt.Errorf("quota: read today's usage: %w", err)
		}
		l.mu.Lock()
		for id, u := range usage {
			l.tenant(id).day(day).stored = u
		}
		l.mu.Unlock()
	}
	l.runOnce.Do(func() { go l.run() })
	return nil
}

// Reload reads the tenants' overrides from the store again (Start and
// every flush do).
func (l *Ledger) Reload(ctx context.Context) error {
	if l.cfg.Store == nil {
		return nil
	}
	all, err := l.cfg.Store.TenantQuotas(ctx)
	if err != nil {
		return fmt.Errorf("quota: read the tenants' quotas: %w", err)
	}
	over := map[string]map[Key]int64{}
	for id, m := range all {
		for name, v := range m {
			k := Key(name)
			if !k.Valid() {
				continue // a quota this build does not know
			}
			if over[id] == nil {
				over[id] = map[Key]int64{}
			}
			over[id][k] = v
		}
	}
	l.mu.Lock()
	l.overrides = over
	l.mu.Unlock()
	return nil
}

// Close writes what is not written yet and stops the writes.
func (l *Ledger) Close(ctx context.Context) error {
	started := true
	l.runOnce.Do(func() { started = false })
	l.endOnce.Do(func() { close(l.stop) })
	if started {
		select {
		case <-l.done:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return l.Flush(ctx)
}

// run writes the counters every FlushInterval, and within FlushGap of a
// sandbox's end.
func (l *Ledger) run() {
	defer close(l.done)
	tick := time.NewTicker(l.cfg.FlushInterval)
	defer tick.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-tick.C:
			ctx, cancel := context.WithTimeout(context.Background(), l.cfg.FlushInterval)
			if err := l.Reload(ctx); err != nil {
				l.cfg.Logger.Warn("quota: read overrides", "err", err)
			}
			cancel()
		case <-l.nudge:
			select {
			case <-l.stop:
				return
			case <-time.After(l.cfg.FlushGap):
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), l.cfg.FlushInterval)
		if err := l.Flush(ctx); err != nil {
			l.cfg.Logger.Warn("quota: write usage", "err", err)
		}
		cancel()
	}
}

// tenant returns the record of a tenant, made if new (l.mu held).
func (l *Ledger) tenant(id string) *tenant {
	t := l.tenants[id]
	if t == nil {
		t = &tenant{holds: map[*Hold]struct{}{}, days: map[string]*dayCount{}}
		l.tenants[id] = t
	}
	return t
}

// day returns the tenant's counters of a day, made if new.
func (t *tenant) day(day string) *dayCount {
	d := t.days[day]
	if d == nil {
		d = &dayCount{}
		t.days[day] = d
	}
	return d
}

// limit returns the tenant's limit of k and where it comes from (l.mu
// held).
func (l *Ledger) limit(tenantID string, k Key) (int64, string) {
	if v, ok := l.overrides[tenantID][k]; ok {
		return v, "tenant"
	}
	if v, ok := l.cfg.Defaults[k]; ok {
		return v, "default"
	}
	return Unlimited, "default"
}

// Limits returns the limits that apply to a tenant now.
func (l *Ledger) Limits(tenantID string) Limits {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := Limits{}
	for _, k := range Keys() {
		out[k], _ = l.limit(tenantID, k)
	}
	return out
}

// Defaults returns the operator's limits.
func (l *Ledger) Defaults() Limits {
	out := Limits{}
	for k, v := range l.cfg.Defaults {
		out[k] = v
	}
	return out
}

// pruneExecs drops the executions that left the minute (l.mu held).
func (t *tenant) pruneExecs(now time.Time) {
	cut := now.Add(-time.Minute)
	i := 0
	for i < len(t.execs) && !t.execs[i].After(cut) {
		i++
	}
	if i > 0 {
		t.execs = append(t.execs[:0], t.execs[i:]...)
	}
}

// sandboxMillis is the tenant's sandbox time of the day of now: counted
// and of its live sandboxes since they were last counted (l.mu held).
func (t *tenant) sandboxMillis(now time.Time) int64 {
	day := Day(now)
	var ms int64
	if d := t.days[day]; d != nil {
		ms = d.total().SandboxMillis
	}
	start := nextMidnight(now).AddDate(0, 0, -1)
	for h := range t.holds {
		if h.started {
			from := h.counted
			if from.Before(start) {
				from = start
			}
			if now.After(from) {
				ms += now.Sub(from).Milliseconds()
			}
		}
	}
	return ms
}

func (t *tenant) egressBytes(now time.Time) int64 {
	if d := t.days[Day(now)]; d != nil {
		return d.total().EgressBytes
	}
	return 0
}

// Refusal is a request over a quota, as its problem's members tell it.
type Refusal struct {
	Quota     Key
	Limit     int64
	Used      int64
	Requested int64 // what the request asked for (vCPU, memory); 0 otherwise
	ResetsAt  time.Time
}

// refuse returns the 429 problem of a refusal.
func refuse(r Refusal, retry time.Duration) error {
	k := r.Quota
	d, _ := lookup(k)
	msg := fmt.Sprintf("over the tenant's %s quota: %s of %s %s", k, k.Format(r.Used), k.Format(r.Limit), d.what)
	if r.Requested > 0 {
		msg += fmt.Sprintf(", and the request asks for %s more", k.Format(r.Requested))
	}
	switch k.Window() {
	case WindowDay:
		msg += "; the count starts again at " + r.ResetsAt.Format(time.RFC3339)
	case WindowMinute:
		msg += "; retry when the oldest leaves the window"
	default:
		msg += "; retry when one of the tenant's sandboxes has ended"
	}
	e := airlock.Problem(airlock.ERATELIMITED, k.Problem(), "%s", msg).RetryLater(max(retry, time.Second)).
		With("quota", string(k)).With("limit", r.Limit).With("used", r.Used).With("unit", k.Unit())
	if r.Requested > 0 {
		e = e.With("requested", r.Requested)
	}
	if !r.ResetsAt.IsZero() {
		e = e.With("resets_at", r.ResetsAt.UTC().Format(time.RFC3339))
	}
	return e
}

// RefusalOf returns the quota a refusal names, or "" for any other
// error.
func RefusalOf(err error) Key {
	var e *airlock.Error
	if !errors.As(err, &e) || e.Code != airlock.ERATELIMITED {
		return ""
	}
	q, _ := e.Extensions["quota"].(string)
	return Key(q)
}

// Exec counts one execution of a session (an exec or a cell) against
// the tenant's executions per minute, or refuses it.
func (l *Ledger) Exec(tenantID string) error {
	now := l.cfg.Now()
	if l.cfg.Shared != nil {
		return l.execShared(tenantID, now)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	t := l.tenant(tenantID)
	if err := l.checkRate(tenantID, t, now); err != nil {
		l.refusals.WithLabelValues(string(ExecutionsPerMinute)).Inc()
		return err
	}
	t.execs = append(t.execs, now)
	return nil
}

// checkRate refuses an execution past the minute's limit (l.mu held).
func (l *Ledger) checkRate(tenantID string, t *tenant, now time.Time) error {
	t.pruneExecs(now)
	limit, _ := l.limit(tenantID, ExecutionsPerMinute)
	if limit < 0 || int64(len(t.execs)) < limit {
		return nil
	}
	retry := time.Minute
	if n := len(t.execs); n > 0 {
		// The limit-th newest must leave before one more fits.
		idx := n - int(limit)
		if limit == 0 {
			idx = n - 1
		}
		retry = t.execs[idx].Add(time.Minute).Sub(now)
	}
	return refuse(Refusal{Quota: ExecutionsPerMinute, Limit: limit, Used: int64(len(t.execs))}, retry)
}

// soonestEnd is how long until the first of the tenant's holds that
// match is expected to end, at most maxRetry (l.mu held).
func (t *tenant) soonestEnd(now time.Time, match func(*Hold) bool) time.Duration {
	best := maxRetry
	for h := range t.holds {
		if match(h) {
			best = min(best, h.expectedEnd(t.runAvg).Sub(now))
		}
	}
	return max(best, time.Second)
}

// maxRetry bounds the Retry-After of a concurrent quota: a session can
// be deleted at any time, so a client is asked to look again by then.
const maxRetry = 10 * time.Minute

// usageOf returns the tenant's use of k now (l.mu held).
func (l *Ledger) usageOf(t *tenant, k Key, now time.Time) int64 {
	switch k {
	case Sessions:
		return int64(t.sessions)
	case Runs:
		return int64(t.runs)
	case ExecutionsPerMinute:
		t.pruneExecs(now)
		return int64(len(t.execs))
	case VCPU:
		return t.milliCPU
	case Memory:
		return t.memory
	case SandboxSecondsPerDay:
		return t.sandboxMillis(now) / 1000
	case EgressBytesPerDay:
		return t.egressBytes(now)
	}
	return 0
}

var _ airlock.UsageService = (*Ledger)(nil)

// Usage returns the tenant's use of every quota now (GET /v1/usage); on
// a fleet, what the whole fleet holds.
func (l *Ledger) Usage(ctx context.Context, tenant *airlock.Tenant) (*airlock.Usage, error) {
	return l.usage(ctx, tenant.ID)
}

// UsageOf returns the tenant's use of every quota now (on a fleet whose
// counters cannot be read, what this node knows).
func (l *Ledger) UsageOf(tenantID string) *airlock.Usage {
	u, err := l.usage(context.Background(), tenantID)
	if err != nil {
		u, _ = l.usageFrom(tenantID, nil)
	}
	return u
}

func (l *Ledger) usage(ctx context.Context, tenantID string) (*airlock.Usage, error) {
	var u *airlock.Usage
	var err error
	if l.cfg.Shared == nil {
		u, err = l.usageFrom(tenantID, nil)
	} else {
		st, serr := l.cfg.Shared.State(ctx, tenantID)
		if serr != nil {
			return nil, sharedProblem(serr)
		}
		u, err = l.usageFrom(tenantID, &st)
	}
	if err != nil || l.cfg.Stored == nil {
		return u, err
	}
	for i, q := range u.Quotas {
		if q.Window != WindowStored {
			continue
		}
		used, serr := l.cfg.Stored(ctx, tenantID, Key(q.Quota))
		if serr != nil {
			return nil, serr
		}
		u.Quotas[i].Used = used
		if q.Limit >= 0 {
			u.Quotas[i].Remaining = max(q.Limit-used, 0)
		}
	}
	return u, nil
}

// usageFrom computes the usage from this ledger's memory, with the
// fleet's holds and executions if st is not nil.
func (l *Ledger) usageFrom(tenantID string, st *SharedState) (*airlock.Usage, error) {
	now := l.cfg.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	t := l.tenants[tenantID]
	if t == nil {
		t = &tenant{holds: map[*Hold]struct{}{}, days: map[string]*dayCount{}}
	}
	if st != nil {
		t = t.withShared(*st)
	}
	u := &airlock.Usage{TenantID: tenantID, At: now.UTC()}
	for _, k := range Keys() {
		limit, source := l.limit(tenantID, k)
		used := l.usageOf(t, k, now)
		q := airlock.QuotaUsage{Quota: string(k), Unit: k.Unit(), Window: k.Window(), Limit: limit, Used: used, Remaining: Unlimited, Source: source}
		if limit >= 0 {
			q.Remaining = max(limit-used, 0)
		}
		if k.Window() == WindowDay {
			at := nextMidnight(now)
			q.ResetsAt = &at
		}
		u.Quotas = append(u.Quotas, q)
	}
	return u, nil
}

// milli turns vCPU into thousandths.
func milli(cpus float64) int64 {
	if cpus <= 0 || math.IsNaN(cpus) {
		return 0
	}
	return int64(math.Round(cpus * 1000))
}
