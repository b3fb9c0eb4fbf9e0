package provision

import (
	"context"
	"fmt"
	"math"
	"sort"
	"sync"
	"time"

	"github.com/airlockhq/airlock"
)

// PoolConfig sizes the warm pool. The pool is a smoothing buffer, not the
// capacity: per warm key it holds about arrival rate x replenish time
// sandboxes (the sizing rule of the reference design, section 3.3), times
// Headroom, between Min and Max, and all members together stay within
// MemoryBudget, counted by each member's measured memory.
type PoolConfig struct {
	Min          int           // members kept per warm key even when idle
	Max          int           // most members per warm key
	Headroom     float64       // multiplies rate x replenish time
	MaxAge       time.Duration // older members are replaced
	MemoryBudget int64         // bytes for all idle members of the node
	Fillers      int           // sandboxes being readied at once
	RateWindow   time.Duration // arrivals are counted over this window
	// Warm lists image/language pairs readied at start, before any
	// request asks for them, as "image/language".
	Warm []string
	// Disabled turns the pool off: every request restores or boots.
	Disabled bool
	// TemplateMax caps the members of one template's key (4): a
	// template's pool grows with its own arrival rate up to it, from
	// zero (Min does not apply to templates).
	TemplateMax int
	// TemplateIdle is how long a template's key may go without an
	// arrival before its members are destroyed and its entry dropped
	// (5 minutes): a template nobody uses holds no memory.
	TemplateIdle time.Duration
}

func (c *PoolConfig) defaults() {
	if c.Max <= 0 {
		c.Max = 8
	}
	if c.Min < 0 {
		c.Min = 0
	}
	if c.Min > c.Max {
		c.Min = c.Max
	}
	if c.Headroom <= 0 {
		c.Headroom = 1.5
	}
	if c.MaxAge <= 0 {
		c.MaxAge = 10 * time.Minute
	}
	if c.MemoryBudget <= 0 {
		c.MemoryBudget = 2 << 30
	}
	if c.Fillers <= 0 {
		c.Fillers = 2
	}
	if c.RateWindow <= 0 {
		c.RateWindow = 30 * time.Second
	}
	if c.TemplateMax <= 0 {
		c.TemplateMax = 4
	}
	if c.TemplateIdle <= 0 {
		c.TemplateIdle = 5 * time.Minute
	}
}

// member is one ready sandbox in the pool.
type member struct {
	sb     airlock.Sandbox
	born   time.Time
	memory int64 // measured after it was readied
}

// poolEntry is the pool of one warm key.
type poolEntry struct {
	key       warmKey
	members   []*member // oldest first
	filling   int
	arrivals  []time.Time // within RateWindow, oldest first
	replenish float64     // EWMA of seconds to ready a member
	lastMiss  time.Time   // of the last request that found no member
	// waiters are requests that missed and wait for the next member
	// rather than make one of their own (see Provisioner.sandboxFor),
	// oldest first.
	waiters []chan airlock.Sandbox
	filled  bool // a member was readied once (Provisioner.Warmed)
	// forgotten: the entry's image was forgotten (forget); what is
	// readied for it now is destroyed.
	forgotten bool
	// last is the entry's last arrival (or its registration): a
	// template's entry idle for TemplateIdle is dropped.
	last time.Time
}

// pool keeps ready sandboxes per warm key. A member is handed to exactly
// one request and never comes back.
type pool struct {
	p   *Provisioner
	cfg PoolConfig

	mu      sync.Mutex
	entries map[string]*poolEntry
	memory  int64 // of all members
	filling int
	wake    chan struct{}
}

func newPool(prov *Provisioner, cfg PoolConfig) *pool {
	cfg.defaults()
	return &pool{p: prov, cfg: cfg, entries: map[string]*poolEntry{}, wake: make(chan struct{}, 1)}
}

func (p *pool) entry(k warmKey) *poolEntry {
	e, ok := p.entries[k.id]
	if !ok {
		e = &poolEntry{key: k, last: time.Now()}
		p.entries[k.id] = e
	}
	return e
}

// register makes the pool keep members of k from now on.
func (p *pool) register(k warmKey) {
	p.mu.Lock()
	p.entry(k)
	p.mu.Unlock()
	p.poke()
}

// take hands out the oldest ready member of k, or nil on a miss. Either
// way the arrival counts toward the pool's size.
func (p *pool) take(k warmKey) airlock.Sandbox {
	if p.cfg.Disabled {
		return nil
	}
	p.mu.Lock()
	e := p.entry(k)
	now := time.Now()
	e.arrivals = append(e.arrivals, now)
	e.last = now
	var got *member
	var dead []*member
	for len(e.members) > 0 {
		mb := e.members[0]
		e.members = e.members[1:]
		p.memory -= mb.memory
		if alive(mb.sb) == nil {
			got = mb
			break
		}
		dead = append(dead, mb)
	}
	if got == nil {
		e.lastMiss = now
	}
	size := len(e.members)
	p.mu.Unlock()
	p.poke()
	labels := []string{k.img.Name, k.langLabel()}
	p.discard(k, dead)
	p.p.metrics.poolSize.WithLabelValues(labels...).Set(float64(size))
	if got == nil {
		p.p.metrics.poolMisses.WithLabelValues(labels...).Inc()
		return nil
	}
	p.p.metrics.poolHits.WithLabelValues(labels...).Inc()
	return got.sb
}

func (p *pool) poke() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// target is how many members e should have now.
func (p *pool) target(e *poolEntry, now time.Time) int {
	cut := now.Add(-p.cfg.RateWindow)
	i := 0
	for i < len(e.arrivals) && e.arrivals[i].Before(cut) {
		i++
	}
	e.arrivals = e.arrivals[i:]
	rate := arrivalRate(e.arrivals, now, p.cfg.RateWindow)
	replenish := e.replenish
	if replenish == 0 {
		replenish = 0.5 // until measured
	}
	n := int(math.Ceil(rate * replenish * p.cfg.Headroom))
	if e.key.template() {
		// A template's pool follows its own arrivals alone: none while
		// nobody asks, up to its own cap while it is busy.
		if now.Sub(e.last) > p.cfg.TemplateIdle {
			return 0
		}
		return min(n, p.cfg.TemplateMax, p.cfg.Max)
	}
	return min(max(n, p.cfg.Min), p.cfg.Max)
}

// arrivalRate is the arrival rate per second of the arrivals (oldest
// first, all within window of now): the higher of the rate over the
// whole window and over its last sixth. The long window keeps the pool
// through a lull; the short one follows a ramp at once, where an average
// over the long window would lag behind demand for most of a window and
// let requests miss while it catches up.
func arrivalRate(arrivals []time.Time, now time.Time, window time.Duration) float64 {
	long := float64(len(arrivals)) / window.Seconds()
	short := window / 6
	cut := now.Add(-short)
	n := len(arrivals) - sort.Search(len(arrivals), func(i int) bool { return !arrivals[i].Before(cut) })
	return max(long, float64(n)/short.Seconds())
}

// run keeps the pool filled until ctx ends, then destroys every member.
func (p *pool) run(ctx context.Context) {
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		p.step(ctx)
		select {
		case <-ctx.Done():
			p.drain()
			return
		case <-p.wake:
		case <-tick.C:
		}
	}
}

// step retires old members and starts fills where entries are short.
func (p *pool) step(ctx context.Context) {
	if p.cfg.Disabled || ctx.Err() != nil {
		return
	}
	now := time.Now()
	var retire []*member
	dead := map[*poolEntry][]*member{}
	p.mu.Lock()
	for id, e := range p.entries {
		for len(e.members) > 0 && now.Sub(e.members[0].born) > p.cfg.MaxAge {
			retire = append(retire, e.members[0])
			p.memory -= e.members[0].memory
			e.members = e.members[1:]
		}
		// Members that died idle are replaced now, not found at hand-out
		// (only what costs no system call here: the hand-out checks the
		// processes as well).
		live := e.members[:0]
		for _, mb := range e.members {
			if exited(mb.sb) == nil {
				live = append(live, mb)
				continue
			}
			dead[e] = append(dead[e], mb)
			p.memory -= mb.memory
		}
		clear(e.members[len(live):])
		e.members = live
		if e.key.template() && now.Sub(e.last) > p.cfg.TemplateIdle {
			// An idle template: its members go, and so does its entry
			// once nothing is being readied for it or waits on it.
			for _, mb := range e.members {
				p.memory -= mb.memory
			}
			retire = append(retire, e.members...)
			e.members = nil
			if e.filling == 0 && len(e.waiters) == 0 {
				delete(p.entries, id)
				p.p.metrics.poolSize.DeleteLabelValues(e.key.img.Name, e.key.langLabel())
				continue
			}
		}
	}
	for _, e := range p.entries {
		want := p.target(e, now)
		for len(e.members)+e.filling < want && p.filling < p.cfg.Fillers && p.memory+p.estimate(e) <= p.cfg.MemoryBudget {
			e.filling++
			p.filling++
			p.p.bg.Add(1)
			go p.fill(ctx, e)
		}
		p.p.metrics.poolSize.WithLabelValues(e.key.img.Name, e.key.langLabel()).Set(float64(len(e.members)))
	}
	p.p.metrics.poolMemory.Set(float64(p.memory))
	p.mu.Unlock()
	for _, mb := range retire {
		p.p.destroyLater(mb.sb, nil)
	}
	for e, mbs := range dead {
		p.discard(e.key, mbs)
	}
}

// alive reports whether a pool member can still be handed out: its
// sandbox has not exited and, where the backend can tell (airlock.Prober),
// its processes run and its agent's connection is open. It costs no round
// trip to the agent.
func alive(sb airlock.Sandbox) error {
	if err := exited(sb); err != nil {
		return err
	}
	if pr, ok := sb.(airlock.Prober); ok {
		return pr.Alive()
	}
	return nil
}

// exited reports a sandbox whose Done is closed: the check of the pool's
// steps, which costs nothing.
func exited(sb airlock.Sandbox) error {
	select {
	case <-sb.Done():
		return fmt.Errorf("%s exited: %w", sb.ID(), airlock.ErrSandboxGone)
	default:
		return nil
	}
}

// discard destroys members of k found dead (killed, OOM) while idle.
func (p *pool) discard(k warmKey, dead []*member) {
	for _, mb := range dead {
		p.p.cfg.Logger.Warn("pool: a member died while idle; destroying it", "key", k.name(), "sandbox", mb.sb.ID(), "err", alive(mb.sb))
		p.p.metrics.poolDead.WithLabelValues(k.img.Name, k.langLabel()).Inc()
		p.p.destroyLater(mb.sb, nil)
	}
}

// estimate is the memory a new member of e will likely take.
func (p *pool) estimate(e *poolEntry) int64 {
	if len(e.members) > 0 {
		return e.members[len(e.members)-1].memory
	}
	return 64 << 20
}

// wait registers a request that missed k: the next member readied for k
// is sent on the returned channel (buffered), unless cancel is called
// first; cancel returns the member if one was sent meanwhile. ok is false
// when the pool is off.
func (p *pool) wait(k warmKey) (ch chan airlock.Sandbox, cancel func() airlock.Sandbox, ok bool) {
	if p.cfg.Disabled {
		return nil, nil, false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	e := p.entry(k)
	ch = make(chan airlock.Sandbox, 1)
	e.waiters = append(e.waiters, ch)
	cancel = func() airlock.Sandbox {
		p.mu.Lock()
		defer p.mu.Unlock()
		for i, w := range e.waiters {
			if w == ch {
				e.waiters = append(e.waiters[:i:i], e.waiters[i+1:]...)
				return nil
			}
		}
		// Already handed a member: the caller gets it.
		return <-ch
	}
	return ch, cancel, true
}

// behindFor is how long after a miss the pool counts as behind demand.
const behindFor = 5 * time.Second

// behind reports whether a member of e about to be readied should be
// plain: the sandbox booted without its recipe's warm runtime, which its
// request then starts itself (python3 as anywhere). It is, when requests
// wait for e's members or one missed within behindFor, and e's runtime is
// booted, not restored: a warm interpreter costs more CPU to start and
// keep than the cold start it saves a request (about 80 ms against 40 ms
// for the light Python here), which is worth it while the node has CPU
// to spare and not while requests queue for it. Restored runtimes are
// ready without that cost. Called with p.mu held.
func (p *pool) behind(e *poolEntry, now time.Time) bool {
	r := e.key.recipe
	if r.Runtime == "" || r.Restore {
		return false
	}
	return len(e.waiters) > 0 || (!e.lastMiss.IsZero() && now.Sub(e.lastMiss) < behindFor)
}

// fill readies one member of e, as one of the node's starts.
func (p *pool) fill(ctx context.Context, e *poolEntry) {
	defer p.p.bg.Done()
	if !p.p.startSlot(ctx) {
		p.mu.Lock()
		e.filling--
		p.filling--
		p.mu.Unlock()
		return
	}
	start := time.Now()
	p.mu.Lock()
	plain := p.behind(e, start)
	p.mu.Unlock()
	sb, source, err := p.p.ready(ctx, e.key, "pool-"+airlock.NewID()[:16], plain)
	took := time.Since(start).Seconds()
	var mem int64
	if err == nil {
		if st, serr := sb.Stats(ctx); serr == nil {
			mem = st.MemoryBytes
		}
		if plain {
			source = "plain"
		}
		p.p.metrics.poolReady.WithLabelValues(e.key.img.Name, e.key.langLabel(), source).Observe(took)
	}
	p.mu.Lock()
	e.filling--
	p.filling--
	if err == nil {
		e.filled = true
		if e.replenish == 0 {
			e.replenish = took
		} else {
			e.replenish = 0.8*e.replenish + 0.2*took
		}
		if e.forgotten {
			// Its image was forgotten (a deleted template) meanwhile:
			// destroyed below.
		} else if ctx.Err() == nil && len(e.waiters) > 0 {
			// A request waits for exactly this: hand it over.
			w := e.waiters[0]
			e.waiters = e.waiters[1:]
			w <- sb
			sb = nil
		} else if ctx.Err() == nil {
			e.members = append(e.members, &member{sb: sb, born: time.Now(), memory: mem})
			p.memory += mem
			sb = nil
		}
	}
	p.mu.Unlock()
	// The start is given back once the member is placed: a request waiting
	// for one gets it rather than racing to make another.
	p.p.endStart()
	if err != nil {
		if ctx.Err() == nil {
			p.p.cfg.Logger.Error("pool: could not ready a sandbox", "key", e.key.name(), "err", err)
			time.Sleep(time.Second) // do not spin on a failing image
		}
	} else if sb != nil {
		p.p.destroyLater(sb, nil)
	}
	p.poke()
}

// drain destroys every member (at shutdown).
func (p *pool) drain() {
	p.mu.Lock()
	var all []*member
	for _, e := range p.entries {
		all = append(all, e.members...)
		e.members = nil
	}
	p.memory = 0
	p.mu.Unlock()
	for _, mb := range all {
		p.p.destroyLater(mb.sb, nil)
	}
}

// forget drops every entry of the image named name (a deleted template)
// and destroys its members; a member being readied for it is destroyed
// when it is ready (its entry is gone, see fill).
func (p *pool) forget(name string) int {
	p.mu.Lock()
	var all []*member
	for id, e := range p.entries {
		if e.key.img.Name != name {
			continue
		}
		for _, mb := range e.members {
			p.memory -= mb.memory
		}
		all = append(all, e.members...)
		e.members = nil
		e.forgotten = true
		delete(p.entries, id)
		p.p.metrics.poolSize.DeleteLabelValues(e.key.img.Name, e.key.langLabel())
	}
	p.mu.Unlock()
	for _, mb := range all {
		p.p.destroyLater(mb.sb, nil)
	}
	return len(all)
}

// imageMembers reports the ready members of the image named name and
// their memory.
func (p *pool) imageMembers(name string) (members int, memory int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, e := range p.entries {
		if e.key.img.Name == name {
			members += len(e.members)
			for _, mb := range e.members {
				memory += mb.memory
			}
		}
	}
	return members, memory
}

// stats reports members and their memory, for tests and benchmarks.
func (p *pool) stats() (members int, memory int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, e := range p.entries {
		members += len(e.members)
	}
	return members, p.memory
}

// WarmUpLimit bounds how long after Start Warmed waits for the pool's
// first members: a key that cannot be readied (an image that fails to
// boot) must not keep the node out of service for good.
const WarmUpLimit = 3 * time.Minute

// Warmed reports whether every key registered with Warm before Start
// has held a ready member at least once since Start (true from then on,
// whatever the pool holds later: an empty pool under load is demand,
// not a cold node), or WarmUpLimit has passed, or the pool is off; and
// if not, how many keys have.
func (p *Provisioner) Warmed() (ok bool, warm, keys int) {
	p.mu.Lock()
	started, since, regs := p.started, p.startedAt, p.warm
	p.mu.Unlock()
	if p.cfg.Pool.Disabled || p.cfg.Pool.Min < 1 {
		return true, 0, 0
	}
	if !started {
		return false, 0, len(regs)
	}
	p.pool.mu.Lock()
	for _, k := range regs {
		if e := p.pool.entries[k.id]; e != nil && e.filled {
			warm++
		}
	}
	p.pool.mu.Unlock()
	return warm == len(regs) || time.Since(since) > WarmUpLimit, warm, len(regs)
}
