package session_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/teststack"
	"github.com/airlockhq/airlock/service/session"
)

// gatedSink is an event store slowed down by the test: every write waits
// until the gate opens.
type gatedSink struct {
	next    airlock.EventSink
	gate    chan struct{}
	mu      sync.Mutex
	waiting int // writes held at the gate now
}

func (g *gatedSink) RecordEvent(ctx context.Context, ev *airlock.Event) error {
	g.mu.Lock()
	g.waiting++
	g.mu.Unlock()
	<-g.gate
	g.mu.Lock()
	g.waiting--
	g.mu.Unlock()
	return g.next.RecordEvent(ctx, ev)
}

func (g *gatedSink) held() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.waiting
}

// A session's lifecycle events are written outside its lock: while the
// event store hangs, sessions are still created, run commands and are
// deleted. Once the store answers, every event is there, each session's
// in the order it happened.
func TestEventsDoNotHoldSessions(t *testing.T) {
	g := &gatedSink{gate: make(chan struct{})}
	s := newStack(t, func(c *session.Config) {
		g.next = c.Events
		c.Events = g
	})
	var once sync.Once
	open := func() { once.Do(func() { close(g.gate) }) }
	t.Cleanup(open)
	// Bounded, so that calls held by the store fail the test soon.
	ctx := ctxFor(t, 2*time.Minute)

	const n = 2
	ids := make([]string, n)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sess, _, err := s.a.c.CreateSession(ctx, airlock.CreateSessionRequest{Image: "python-ds", TimeoutS: 300})
			if err != nil {
				errs <- err
				return
			}
			ids[i] = sess.ID
			for range 3 {
				e, err := s.a.c.Exec(ctx, sess.ID, airlock.SessionExecRequest{Shell: "echo hi"})
				if err != nil || e.ExitCode != 0 {
					errs <- err
					return
				}
			}
			_, err = s.a.c.DeleteSession(ctx, sess.ID)
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("a session call while the event store hangs: %v", err)
		}
	}
	// Nothing was written: the writer is held at the gate with the first
	// event, the rest queued behind it.
	if g.held() != 1 {
		t.Fatalf("%d writes at the gate, want 1", g.held())
	}
	evs, err := s.store.ListEvents(ctx, airlock.EventFilter{TenantID: s.a.tenant.ID, Limit: 100})
	if err != nil || len(evs) != 0 {
		t.Fatalf("events written while the store hung: %v %v", evs, err)
	}

	open()
	want := []string{airlock.EventSessionCreated, airlock.EventSessionEnded}
	deadline := time.Now().Add(time.Minute)
	for {
		evs, err = s.store.ListEvents(ctx, airlock.EventFilter{TenantID: s.a.tenant.ID, Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) >= n*len(want) || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond) // polling a condition
	}
	if len(evs) != n*len(want) {
		t.Fatalf("%d events, want %d: %+v", len(evs), n*len(want), evs)
	}
	bySession := map[string][]*airlock.Event{}
	for _, ev := range evs {
		bySession[ev.SessionID] = append(bySession[ev.SessionID], ev)
	}
	for _, id := range ids {
		got := bySession[id]
		if len(got) != len(want) {
			t.Fatalf("session %s: %d events", id, len(got))
		}
		for i, ev := range got {
			if ev.Type != want[i] {
				t.Errorf("session %s event %d: %s, want %s", id, i, ev.Type, want[i])
			}
			if i > 0 && ev.At.Before(got[i-1].At) {
				t.Errorf("session %s: event %d at %s before event %d at %s", id, i, ev.At, i-1, got[i-1].At)
			}
		}
	}
}

// lostSink loses every event, as a server that crashed before its event
// writer wrote them would.
type lostSink struct{}

func (lostSink) RecordEvent(ctx context.Context, ev *airlock.Event) error {
	return airlock.Errorf(airlock.EINVALID, "lost: the server crashed before writing it")
}

// A crash loses the events queued in memory, not the transitions: the
// next start (on the same store, the first run abandoned without Close)
// compares each session's record with its newest event and writes what
// is missing, marked recovered, in order: a paused session's created and
// paused, a deleted session's end with its reason. A start after that
// writes nothing more, and later events follow the recovered ones.
func TestEventsSurviveCrash(t *testing.T) {
	ctx := ctxFor(t, 5*time.Minute)
	first := newStack(t, func(c *session.Config) { c.Events = lostSink{} })
	c := first.a.c
	paused := first.create(first.a, airlock.CreateSessionRequest{Image: "base", TimeoutS: 900})
	if _, err := c.PauseSession(ctx, paused.ID); err != nil {
		t.Fatal(err)
	}
	deleted := first.create(first.a, airlock.CreateSessionRequest{Image: "base", TimeoutS: 900})
	if _, err := c.DeleteSession(ctx, deleted.ID); err != nil {
		t.Fatal(err)
	}
	feed := func() []*airlock.Event {
		t.Helper()
		evs, err := first.store.ListEvents(ctx, airlock.EventFilter{TenantID: first.a.tenant.ID, Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		return evs
	}
	if evs := feed(); len(evs) != 0 {
		t.Fatalf("events before the crash: %+v", evs)
	}

	second := newBareStack(t, teststack.Options{Store: first.store, BlobDir: first.BlobDir, MasterKey: first.MasterKey})
	if _, err := second.mgr.Recover(ctx); err != nil {
		t.Fatalf("recover: %v", err)
	}
	type want struct{ session, typ, reason string }
	check := func(evs []*airlock.Event, wants []want, recovered int) {
		t.Helper()
		if len(evs) != len(wants) {
			t.Fatalf("%d events, want %d: %+v", len(evs), len(wants), evs)
		}
		for i, w := range wants {
			ev := evs[i]
			if ev.SessionID != w.session || ev.Type != w.typ || ev.Reason != w.reason || ev.ID == "" {
				t.Errorf("event %d: %s %s %q, want %s %s %q", i, ev.SessionID, ev.Type, ev.Reason, w.session, w.typ, w.reason)
			}
			if got := ev.Data[airlock.RecoveredData] == true; got != (i < recovered) {
				t.Errorf("event %d (%s): recovered %v", i, ev.Type, got)
			}
		}
	}
	wants := []want{
		{paused.ID, airlock.EventSessionCreated, ""},
		{paused.ID, airlock.EventSessionPaused, ""},
		{deleted.ID, airlock.EventSessionEnded, airlock.EndDeleted},
	}
	check(feed(), wants, 3)

	// Another start finds nothing missing.
	if _, err := second.mgr.Recover(ctx); err != nil {
		t.Fatalf("recover again: %v", err)
	}
	check(feed(), wants, 3)

	// Later transitions follow, as ever.
	c2 := second.newClientFor(first.a)
	if _, err := c2.ResumeSession(ctx, paused.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := c2.DeleteSession(ctx, paused.ID); err != nil {
		t.Fatal(err)
	}
	wants = append(wants, want{paused.ID, airlock.EventSessionResumed, airlock.PauseByRequest}, want{paused.ID, airlock.EventSessionEnded, airlock.EndDeleted})
	deadline := time.Now().Add(time.Minute)
	for len(feed()) < len(wants) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond) // polling a condition
	}
	check(feed(), wants, 3)
	second.checkClean()
}
