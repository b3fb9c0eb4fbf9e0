package abuse_test

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/testenv/testreq"
	"github.com/airlockhq/airlock/service/abuse"
	"github.com/airlockhq/airlock/store/sqlite"
)

// fakeSandbox reports the stats a test sets and records its kill.
type fakeSandbox struct {
	id     string
	mu     sync.Mutex
	st     airlock.Stats
	killed bool
	done   chan struct{}
}

var (
	_ airlock.Sandbox = (*fakeSandbox)(nil)
	_ airlock.Killer  = (*fakeSandbox)(nil)
)

func newFake(id string) *fakeSandbox { return &fakeSandbox{id: id, done: make(chan struct{})} }

func (s *fakeSandbox) ID() string                    { return s.id }
func (s *fakeSandbox) Agent() airlock.Agent          { return nil }
func (s *fakeSandbox) WorkspaceDir() string          { return "" }
func (s *fakeSandbox) Done() <-chan struct{}         { return s.done }
func (s *fakeSandbox) Stop(context.Context) error    { return nil }
func (s *fakeSandbox) Destroy(context.Context) error { return nil }
func (s *fakeSandbox) Stats(context.Context) (airlock.Stats, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.st, nil
}
func (s *fakeSandbox) Kill(context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.killed {
		s.killed = true
		close(s.done)
	}
	return nil
}
func (s *fakeSandbox) set(f func(*airlock.Stats)) {
	s.mu.Lock()
	f(&s.st)
	s.mu.Unlock()
}
func (s *fakeSandbox) wasKilled() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.killed
}

// clock is a test's time, moved by the test.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

type fixture struct {
	m      *abuse.Monitor
	store  *sqlite.DB
	tenant *airlock.Tenant
	clock  *clock
}

func newFixture(t *testing.T, cfg abuse.Config) *fixture {
	t.Helper()
	ctx := context.Background()
	store, err := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(t.TempDir(), "db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	tenant := &airlock.Tenant{Name: "acme"}
	if err := store.CreateTenant(ctx, tenant); err != nil {
		t.Fatal(err)
	}
	c := &clock{t: time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)}
	cfg.Store, cfg.Now = store, c.Now
	cfg.Interval = time.Hour // the test samples by moving the clock and calling Sample
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	m, err := abuse.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	return &fixture{m: m, store: store, tenant: tenant, clock: c}
}

func (f *fixture) events(t *testing.T) []*airlock.AbuseEvent {
	t.Helper()
	evs, err := f.store.ListAbuseEvents(context.Background(), airlock.AbuseEventFilter{TenantID: f.tenant.ID})
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

// Each detector with the default thresholds: the behaviour is detected,
// the sandbox killed and the event recorded; the look-alike is not.
func TestDetectors(t *testing.T) {
	limits := airlock.Limits{CPUs: 1, Pids: 256}
	type step struct {
		advance time.Duration
		stats   func(*airlock.Stats)
		output  int
		egress  *airlock.EgressEvent
	}
	spin := func(n int, output bool) []step {
		var s []step
		for i := 0; i < n; i++ {
			st := step{advance: time.Second, stats: func(s *airlock.Stats) { s.CPUTime += 980 * time.Millisecond }}
			if output {
				st.output = 20
			}
			s = append(s, st)
		}
		return s
	}
	egressSteps := func(n int, ev func(i int) *airlock.EgressEvent) []step {
		var s []step
		for i := 0; i < n; i++ {
			s = append(s, step{advance: 100 * time.Millisecond, egress: ev(i)})
		}
		return s
	}
	denied := func(port int) *airlock.EgressEvent {
		return &airlock.EgressEvent{Kind: airlock.EgressConnection, Verdict: airlock.VerdictDenied,
			Dialled: "198.18.7.2:" + itoa(port), Port: port, Protocol: "opaque"}
	}
	cases := []struct {
		name     string
		steps    []step
		detector string // "" means not flagged
	}{
		{"spinner without output", spin(47, false), airlock.DetectorMining},
		{"busy with progress output", spin(70, true), ""},
		{"spinner for less than the window", spin(40, false), ""},
		{"half the quota, no output", func() []step {
			var s []step
			for i := 0; i < 70; i++ {
				s = append(s, step{advance: time.Second, stats: func(s *airlock.Stats) { s.CPUTime += 500 * time.Millisecond }})
			}
			return s
		}(), ""},
		{"DNS query for a pool", []step{{egress: &airlock.EgressEvent{Kind: airlock.EgressDNS, Name: "xmr-eu1.nanopool.org", Verdict: airlock.VerdictDenied}}}, airlock.DetectorMining},
		{"DNS query for a look-alike", []step{{egress: &airlock.EgressEvent{Kind: airlock.EgressDNS, Name: "notnanopool.org", Verdict: airlock.VerdictDenied}}}, ""},
		{"stratum on an opaque connection", []step{{egress: &airlock.EgressEvent{Kind: airlock.EgressConnection, Protocol: "opaque", Port: 3333, Flags: []string{"stratum"}, Verdict: airlock.VerdictDenied}}}, airlock.DetectorMining},
		{"TLS to a pool name", []step{{egress: &airlock.EgressEvent{Kind: airlock.EgressConnection, Protocol: "tls", SNI: "gulf.moneroocean.stream", Name: "gulf.moneroocean.stream", Port: 443, Verdict: airlock.VerdictDenied}}}, airlock.DetectorMining},
		{"scan of 25 ports", egressSteps(25, func(i int) *airlock.EgressEvent { return denied(1000 + i) }), airlock.DetectorScanning},
		{"one refused port tried 40 times", egressSteps(40, func(int) *airlock.EgressEvent { return denied(22) }), ""},
		{"19 ports", egressSteps(19, func(i int) *airlock.EgressEvent { return denied(1000 + i) }), ""},
		{"slow scan outside the window", func() []step {
			var s []step
			for i := 0; i < 30; i++ {
				s = append(s, step{advance: time.Second, egress: denied(2000 + i)})
			}
			return s
		}(), ""},
		{"fork burst", []step{{advance: time.Second, stats: func(s *airlock.Stats) { s.Pids += 200 }}}, airlock.DetectorForkBomb},
		{"refusals at the limit", func() []step {
			var s []step
			for i := 0; i < 3; i++ {
				s = append(s, step{advance: time.Second, stats: func(s *airlock.Stats) { s.PidsLimitHits += 7 }})
			}
			return s
		}(), airlock.DetectorForkBomb},
		{"a few workers", []step{{advance: time.Second, stats: func(s *airlock.Stats) { s.Pids += 16 }}, {advance: time.Second}}, ""},
		{"DNS tunnel", egressSteps(10, func(i int) *airlock.EgressEvent {
			return &airlock.EgressEvent{Kind: airlock.EgressDNS, Name: "x.t.example", Flags: []string{"long-label", "high-entropy"}, Verdict: airlock.VerdictDenied}
		}), airlock.DetectorDNSTunnel},
		{"plain DNS queries", egressSteps(50, func(i int) *airlock.EgressEvent {
			return &airlock.EgressEvent{Kind: airlock.EgressDNS, Name: "api.example", Verdict: airlock.VerdictAllowed}
		}), ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t, abuse.Config{})
			sb := newFake("sb-1")
			sb.set(func(s *airlock.Stats) { s.Pids = 20 })
			stop := f.m.Watch(airlock.Watched{Sandbox: sb, TenantID: f.tenant.ID, SessionID: "sess-1", Limits: limits})
			defer stop()
			tap := f.m.EgressStore(f.store)
			for _, s := range c.steps {
				f.clock.Advance(s.advance)
				if s.stats != nil {
					sb.set(s.stats)
				}
				if s.output > 0 {
					f.m.Output(sb.ID(), s.output)
				}
				if s.egress != nil {
					ev := *s.egress
					ev.TenantID, ev.SessionID, ev.Time = f.tenant.ID, "sess-1", f.clock.Now()
					if err := tap.RecordEgress(context.Background(), []*airlock.EgressEvent{&ev}); err != nil {
						t.Fatal(err)
					}
				}
				if s.advance > 0 {
					f.m.Sample()
				}
			}
			f.m.Settle()
			evs := f.events(t)
			if c.detector == "" {
				if len(evs) != 0 || sb.wasKilled() || f.m.KilledBy(sb.ID()) != "" {
					t.Fatalf("flagged: %+v", evs[0])
				}
				return
			}
			if len(evs) != 1 {
				t.Fatalf("%d events, want 1", len(evs))
			}
			ev := evs[0]
			if ev.Detector != c.detector || ev.SessionID != "sess-1" || ev.Action != airlock.ActionKilled || len(ev.Evidence) == 0 {
				t.Errorf("event %+v", ev)
			}
			if !sb.wasKilled() || f.m.KilledBy(sb.ID()) != airlock.AbuseReason(c.detector) {
				t.Errorf("killed %v, KilledBy %q", sb.wasKilled(), f.m.KilledBy(sb.ID()))
			}
			t.Logf("%s: %s %v", ev.Detector, ev.Summary, ev.Evidence)
		})
	}
}

func itoa(n int) string {
	b := []byte{}
	for n > 0 || len(b) == 0 {
		b = append([]byte{byte('0' + n%10)}, b...)
		n /= 10
	}
	return string(b)
}

// The quarantine response kills and quarantines; record only records;
// a disabled detector does not run; a second finding of the same sandbox
// adds no event; events of another tenant's session are not counted.
func TestResponses(t *testing.T) {
	pool := &airlock.EgressEvent{Kind: airlock.EgressDNS, Name: "pool.supportxmr.com", Verdict: airlock.VerdictDenied}
	for _, c := range []struct {
		cfg        abuse.Config
		action     string
		killed     bool
		quarantine bool
		events     int
	}{
		{abuse.Config{Response: abuse.ResponseQuarantine}, airlock.ActionQuarantined, true, true, 1},
		{abuse.Config{Response: abuse.ResponseRecord}, airlock.ActionRecorded, false, false, 1},
		{abuse.Config{Disabled: []string{airlock.DetectorMining}}, "", false, false, 0},
	} {
		t.Run(string(c.cfg.Response)+"/"+c.action, func(t *testing.T) {
			f := newFixture(t, c.cfg)
			sb := newFake("sb-2")
			defer f.m.Watch(airlock.Watched{Sandbox: sb, TenantID: f.tenant.ID, ExecutionID: "ex-1", Limits: airlock.DefaultLimits})()
			tap := f.m.EgressStore(f.store)
			for i := 0; i < 2; i++ {
				ev := *pool
				ev.TenantID, ev.ExecutionID = f.tenant.ID, "ex-1"
				tap.RecordEgress(context.Background(), []*airlock.EgressEvent{&ev})
			}
			other := *pool
			other.TenantID, other.ExecutionID = "someone-else", "ex-1"
			tap.RecordEgress(context.Background(), []*airlock.EgressEvent{&other})
			f.m.Settle()
			evs := f.events(t)
			if len(evs) != c.events {
				t.Fatalf("%d events, want %d", len(evs), c.events)
			}
			if c.events > 0 && (evs[0].Action != c.action || evs[0].ExecutionID != "ex-1") {
				t.Errorf("event %+v", evs[0])
			}
			if sb.wasKilled() != c.killed {
				t.Errorf("killed %v, want %v", sb.wasKilled(), c.killed)
			}
			q, err := f.store.TenantQuarantine(context.Background(), f.tenant.ID)
			if err != nil {
				t.Fatal(err)
			}
			if (q != nil) != c.quarantine {
				t.Errorf("quarantine %+v, want %v", q, c.quarantine)
			}
			if q != nil && q.EventID != evs[0].ID {
				t.Errorf("quarantine names event %q, want %q", q.EventID, evs[0].ID)
			}
		})
	}
}

// A kill is remembered after the watch ends (the session asks after its
// sandbox died), and the sampling loop runs on its own.
func TestKillRememberedAndLoop(t *testing.T) {
	ctx := context.Background()
	store, err := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(t.TempDir(), "db")})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	tenant := &airlock.Tenant{Name: "acme"}
	store.CreateTenant(ctx, tenant)
	m, err := abuse.New(abuse.Config{Store: store, Interval: 10 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	sb := newFake("sb-3")
	stop := m.Watch(airlock.Watched{Sandbox: sb, TenantID: tenant.ID, SessionID: "s", Limits: airlock.DefaultLimits})
	sb.set(func(s *airlock.Stats) { s.Pids = 300 })
	if !testreq.Poll(10*time.Second, sb.wasKilled) {
		t.Fatal("the loop did not find the fork burst")
	}
	stop()
	if m.KilledBy(sb.ID()) != "abuse:fork-bomb" || m.Watching() != 0 {
		t.Errorf("after the watch: KilledBy %q, watching %d", m.KilledBy(sb.ID()), m.Watching())
	}
}

func TestConfigValidate(t *testing.T) {
	for _, c := range []abuse.Config{
		{},
		{Store: &sqlite.DB{}, Response: "ban"},
		{Store: &sqlite.DB{}, Disabled: []string{"crypto"}},
		{Store: &sqlite.DB{}, Mining: abuse.Mining{CPUFraction: 1.5}},
		{Store: &sqlite.DB{}, Mining: abuse.Mining{Pools: []string{"not a name"}}},
	} {
		if err := c.Validate(); err == nil {
			t.Errorf("%+v: no error", c)
		}
	}
}

// The operator's pool list extends (or replaces) the built-in one.
func TestOperatorPools(t *testing.T) {
	for _, c := range []struct {
		cfg  abuse.Mining
		name string
		want bool
	}{
		{abuse.Mining{Pools: []string{"pool.example"}}, "eu.pool.example", true},
		{abuse.Mining{Pools: []string{"pool.example"}}, "supportxmr.com", true},
		{abuse.Mining{Pools: []string{"pool.example"}, NoBuiltinPools: true}, "supportxmr.com", false},
		{abuse.Mining{Pools: []string{"POOL.Example."}, NoBuiltinPools: true}, "a.b.pool.example.", true},
		{abuse.Mining{Pools: []string{"pool.example"}}, "mypool.example", false},
	} {
		f := newFixture(t, abuse.Config{Mining: c.cfg})
		sb := newFake("sb-p")
		stop := f.m.Watch(airlock.Watched{Sandbox: sb, TenantID: f.tenant.ID, SessionID: "s", Limits: airlock.DefaultLimits})
		f.m.EgressStore(f.store).RecordEgress(context.Background(), []*airlock.EgressEvent{{TenantID: f.tenant.ID, SessionID: "s",
			Kind: airlock.EgressDNS, Name: c.name, Verdict: airlock.VerdictDenied}})
		f.m.Settle()
		stop()
		if got := len(f.events(t)) == 1; got != c.want {
			t.Errorf("pools %v (no built-in %v), %s: flagged %v, want %v", c.cfg.Pools, c.cfg.NoBuiltinPools, c.name, got, c.want)
		}
	}
}
