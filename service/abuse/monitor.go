package abuse

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/airlockhq/airlock"
)

// Monitor runs the detectors over the sandboxes it watches. It is safe
// for concurrent use.
type Monitor struct {
	cfg     Config
	pools   pools
	off     map[string]bool
	counter *prometheus.CounterVec

	mu      sync.Mutex
	watched map[string]*watched // by sandbox ID
	owners  map[string]*watched // by "s:"+session ID and "e:"+execution ID
	killed  map[string]killMark // by sandbox ID

	stop       chan struct{}
	once       sync.Once
	wg         sync.WaitGroup
	responding sync.WaitGroup // responses under way
}

var _ airlock.Watchdog = (*Monitor)(nil)

// killMark remembers that a detector killed a sandbox, for a while after
// its watch ended (the run and the session ask once they notice).
type killMark struct {
	reason string
	until  time.Time // zero while watched
}

// killMemory is how long a kill is remembered after the watch ends.
const killMemory = 5 * time.Minute

// New returns a monitor and starts its sampling loop; Close stops it.
func New(cfg Config) (*Monitor, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	m := &Monitor{
		cfg:     cfg,
		pools:   newPools(cfg.Mining),
		off:     map[string]bool{},
		watched: map[string]*watched{},
		owners:  map[string]*watched{},
		killed:  map[string]killMark{},
		stop:    make(chan struct{}),
		counter: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "airlock_abuse_events_total",
			Help: "Abuse detections by detector (mining, scanning, fork-bomb, dns-tunnel) and the action taken.",
		}, []string{"detector", "action"}),
	}
	for _, d := range cfg.Disabled {
		m.off[d] = true
	}
	cfg.Metrics.MustRegister(m.counter)
	for _, d := range airlock.Detectors {
		for _, a := range []string{airlock.ActionKilled, airlock.ActionQuarantined, airlock.ActionRecorded} {
			m.counter.WithLabelValues(d, a) // every series exists from the start
		}
	}
	m.wg.Add(1)
	go m.loop()
	return m, nil
}

// Close stops the sampling loop and waits for the responses under way.
func (m *Monitor) Close() {
	m.once.Do(func() { close(m.stop) })
	m.wg.Wait()
	m.responding.Wait()
}

// Watch starts watching a sandbox; the returned func stops it. Watching
// a sandbox already watched (a one-shot run's and a session's view of
// the same sandbox) adds to the first watch.
func (m *Monitor) Watch(w airlock.Watched) func() {
	if w.Sandbox == nil {
		return func() {}
	}
	id := w.Sandbox.ID()
	st, stErr := w.Sandbox.Stats(context.Background()) // the first sample, read outside the lock
	wait := cpuWait(w.Sandbox)
	now := m.cfg.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	x := m.watched[id]
	if x == nil {
		x = newWatched(w, now)
		m.watched[id] = x
		if w.SessionID != "" {
			m.owners["s:"+w.SessionID] = x
		}
		if w.ExecutionID != "" {
			m.owners["e:"+w.ExecutionID] = x
		}
		if stErr == nil {
			x.add(sample{at: now, cpu: st.CPUTime, pids: st.Pids, hits: st.PidsLimitHits, wait: wait})
		}
	}
	x.refs++
	var once sync.Once
	return func() { once.Do(func() { m.unwatch(id, x) }) }
}

func (m *Monitor) unwatch(id string, x *watched) {
	m.mu.Lock()
	defer m.mu.Unlock()
	x.refs--
	if x.refs > 0 || m.watched[id] != x {
		return
	}
	delete(m.watched, id)
	for k, o := range m.owners {
		if o == x {
			delete(m.owners, k)
		}
	}
	if k, ok := m.killed[id]; ok {
		k.until = m.cfg.Now().Add(killMemory)
		m.killed[id] = k
	}
}

// Output notes that a watched sandbox printed n bytes.
func (m *Monitor) Output(sandboxID string, n int) {
	if n <= 0 {
		return
	}
	m.mu.Lock()
	if x := m.watched[sandboxID]; x != nil {
		x.lastOutput = m.cfg.Now()
	}
	m.mu.Unlock()
}

// KilledBy returns abuse:<detector> for a sandbox a detector killed.
func (m *Monitor) KilledBy(sandboxID string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.killed[sandboxID].reason
}

// Watching returns how many sandboxes are watched.
func (m *Monitor) Watching() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.watched)
}

// loop samples every watched sandbox each Interval.
func (m *Monitor) loop() {
	defer m.wg.Done()
	t := time.NewTicker(m.cfg.Interval)
	defer t.Stop()
	for {
		select {
		case <-m.stop:
			return
		case <-t.C:
			m.sampleAll()
		}
	}
}

// sampleAll reads the statistics of every watched sandbox and runs the
// detectors over them.
func (m *Monitor) sampleAll() {
	m.mu.Lock()
	now := m.cfg.Now()
	all := make([]*watched, 0, len(m.watched))
	for _, x := range m.watched {
		if !x.fired {
			all = append(all, x)
		}
	}
	for id, k := range m.killed {
		if !k.until.IsZero() && now.After(k.until) {
			delete(m.killed, id)
		}
	}
	m.mu.Unlock()
	for _, x := range all {
		st, err := x.w.Sandbox.Stats(context.Background())
		if err != nil {
			continue // gone, or going: its owner notices
		}
		wait := cpuWait(x.w.Sandbox)
		now := m.cfg.Now()
		m.mu.Lock()
		x.add(sample{at: now, cpu: st.CPUTime, pids: st.Pids, hits: st.PidsLimitHits, wait: wait})
		var f *finding
		if !m.off[airlock.DetectorMining] {
			f = x.mining(now, m.cfg.Mining)
		}
		if f == nil && !m.off[airlock.DetectorForkBomb] {
			f = x.forkBomb(now, m.cfg.ForkBomb)
		}
		if f != nil {
			m.fire(x, f)
		}
		m.mu.Unlock()
	}
}

// observe runs the detectors that read the egress log over one event.
func (m *Monitor) observe(ev *airlock.EgressEvent) {
	m.mu.Lock()
	x := m.owners["s:"+ev.SessionID]
	if x == nil || ev.SessionID == "" {
		x = m.owners["e:"+ev.ExecutionID]
	}
	if x == nil || x.fired || x.w.TenantID != ev.TenantID {
		m.mu.Unlock()
		return
	}
	at := ev.Time
	if at.IsZero() {
		at = m.cfg.Now()
	}
	var f *finding
	if !m.off[airlock.DetectorMining] {
		f = x.pool(ev, m.pools)
	}
	if f == nil && !m.off[airlock.DetectorScanning] {
		f = x.scanning(ev, at, m.cfg.Scanning)
	}
	if f == nil && !m.off[airlock.DetectorDNSTunnel] {
		f = x.dnsTunnel(ev, at, m.cfg.DNSTunnel)
	}
	if f != nil {
		m.fire(x, f)
	}
	m.mu.Unlock()
}

// fire decides on a finding, once per sandbox (m.mu held): the kill is
// marked at once, so the run and the session that notice the sandbox
// die know why, and the response runs off the sampling loop and the
// audit log's writer.
func (m *Monitor) fire(x *watched, f *finding) {
	if x.fired {
		return
	}
	x.fired = true
	action := airlock.ActionRecorded
	if m.cfg.Response != ResponseRecord {
		m.killed[x.w.Sandbox.ID()] = killMark{reason: airlock.AbuseReason(f.detector)}
		action = airlock.ActionKilled
		if m.cfg.Response == ResponseQuarantine {
			action = airlock.ActionQuarantined
		}
	}
	m.responding.Add(1)
	go func() {
		defer m.responding.Done()
		m.respond(x, f, action, x.started)
	}()
}

// respond carries out a decision: the event, the quarantine, the kill
// and the counter. The quarantine is stored before the kill, so that no
// run or session of the tenant is admitted once its sandbox has died.
func (m *Monitor) respond(x *watched, f *finding, action string, started time.Time) {
	id := x.w.Sandbox.ID()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	now := m.cfg.Now()
	f.evidence["watched_s"] = round(now.Sub(started).Seconds())
	ev := &airlock.AbuseEvent{
		TenantID: x.w.TenantID, SessionID: x.w.SessionID, ExecutionID: x.w.ExecutionID, SandboxID: id,
		Detector: f.detector, Summary: f.summary, Evidence: f.evidence, Action: action, Time: now.UTC(),
	}
	if err := m.cfg.Store.RecordAbuseEvent(ctx, ev); err != nil {
		m.cfg.Logger.Error("abuse: record an event", "sandbox", id, "detector", f.detector, "err", err)
	}
	if action == airlock.ActionQuarantined {
		q := &airlock.Quarantine{TenantID: x.w.TenantID, EventID: ev.ID,
			Reason: fmt.Sprintf("%s detected: %s", f.detector, f.summary)}
		if err := m.cfg.Store.QuarantineTenant(ctx, q); err != nil {
			m.cfg.Logger.Error("abuse: quarantine a tenant", "tenant", x.w.TenantID, "err", err)
		}
	}
	if action != airlock.ActionRecorded {
		var err error
		if k, ok := x.w.Sandbox.(airlock.Killer); ok {
			err = k.Kill(ctx)
		} else {
			err = x.w.Sandbox.Destroy(ctx)
		}
		if err != nil {
			m.cfg.Logger.Error("abuse: kill a sandbox", "sandbox", id, "detector", f.detector, "err", err)
		}
	}
	m.counter.WithLabelValues(f.detector, action).Inc()
	m.cfg.Logger.Warn("abuse detected", "detector", f.detector, "action", action, "tenant", x.w.TenantID,
		"session", x.w.SessionID, "execution", x.w.ExecutionID, "sandbox", id, "summary", f.summary)
}

// EgressStore returns store with every event recorded into it also seen
// by the detectors (give it to the egress service).
func (m *Monitor) EgressStore(store airlock.EgressStore) airlock.EgressStore {
	return &egressTap{EgressStore: store, m: m}
}

type egressTap struct {
	airlock.EgressStore
	m *Monitor
}

func (t *egressTap) RecordEgress(ctx context.Context, events []*airlock.EgressEvent) error {
	for _, ev := range events {
		t.m.observe(ev)
	}
	return t.EgressStore.RecordEgress(ctx, events)
}

// cpuWait is how long the sandbox's threads waited for a CPU, 0 where
// the sandbox cannot tell.
func cpuWait(sb airlock.Sandbox) time.Duration {
	if w, ok := sb.(airlock.CPUWaiter); ok {
		return w.CPUWait(context.Background())
	}
	return 0
}

func round(f float64) float64 { return float64(int64(f*100+0.5)) / 100 }
