package session_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
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
