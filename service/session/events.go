package session

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/airlockhq/airlock"
)

// Events of the session lifecycle: every transition that matters to a
// tenant (created, paused, resumed, ended with its reason, killed by an
// abuse detector) is recorded through Config.Events, which queues it
// for the tenant's webhooks. A failed write is logged; the session goes
// on (its record is the truth).
//
// A transition is decided under the session's lock, but its event is
// not written there: emit appends it to the manager's event queue and
// returns, and one writer goroutine writes the queue in order. So a
// slow store (or a tenant with many webhooks, whose deliveries are
// queued in the same transaction) never holds a session's calls, and
// the events of a session are written in the order they happened (the
// store's order is the feed's). Close and Detach write what is queued
// before they return. What a crash loses from the queue, the next start
// writes from the sessions' records (events_recover.go).

// Bounds of the event queue.
const (
	// maxQueuedEvents is how many events may wait for the writer; past
	// it an event is dropped and logged (the store has been failing for
	// a long time by then).
	maxQueuedEvents = 100_000
	// eventWriteTries is how often a write that fails for a reason other
	// than the event itself is tried before the event is dropped.
	eventWriteTries = 5
	// flushEventsWithin bounds the writing of what is queued at a stop.
	flushEventsWithin = 30 * time.Second
)

// eventQueue holds the events waiting for the writer, oldest first.
type eventQueue struct {
	mu      sync.Mutex
	pending []*airlock.Event
	closed  bool
	wake    chan struct{} // a send means there is work
	done    chan struct{} // closed when the writer has ended
}

// startEvents starts the event writer.
func (m *Manager) startEvents() {
	q := &m.events
	q.wake = make(chan struct{}, 1)
	q.done = make(chan struct{})
	if m.cfg.Events == nil {
		close(q.done)
		q.closed = true
		return
	}
	go m.writeEvents()
}

// flushEvents stops the writer once it has written every queued event,
// or when ctx ends (what is left is logged as lost). It is safe to call
// more than once; later events are written at once by emit.
func (m *Manager) flushEvents(ctx context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), flushEventsWithin)
	defer cancel()
	q := &m.events
	q.mu.Lock()
	if !q.closed {
		q.closed = true
		select {
		case q.wake <- struct{}{}:
		default:
		}
	}
	q.mu.Unlock()
	select {
	case <-q.done:
	case <-ctx.Done():
		q.mu.Lock()
		n := len(q.pending)
		q.mu.Unlock()
		m.cfg.Logger.Error("session events not written before the stop", "events", n, "err", ctx.Err())
	}
}

// writeEvents is the writer: it writes the queue in order until it is
// closed and empty.
func (m *Manager) writeEvents() {
	q := &m.events
	defer close(q.done)
	for {
		q.mu.Lock()
		batch := q.pending
		q.pending = nil
		closed := q.closed
		q.mu.Unlock()
		for _, ev := range batch {
			m.writeEvent(ev)
		}
		if len(batch) > 0 {
			continue
		}
		if closed {
			return
		}
		<-q.wake
	}
}

// writeEvent writes one event, trying again while the store fails for a
// reason other than the event.
func (m *Manager) writeEvent(ev *airlock.Event) {
	wait := 100 * time.Millisecond
	for try := 1; ; try++ {
		err := m.cfg.Events.RecordEvent(context.Background(), ev)
		if err == nil {
			return
		}
		switch airlock.ErrorCode(err) {
		case airlock.EINVALID, airlock.ENOTFOUND, airlock.ECONFLICT:
			try = eventWriteTries
		}
		if try >= eventWriteTries {
			m.cfg.Logger.Error("record session event", "session", ev.SessionID, "type", ev.Type, "tries", try, "err", err)
			return
		}
		time.Sleep(wait)
		wait *= 2
	}
}

// emit records an event about session s: it is queued for the writer
// (or, once the manager has stopped, written now).
func (m *Manager) emit(ctx context.Context, s *airlock.Session, typ, reason, detail string, data map[string]any) {
	if m.cfg.Events == nil {
		return
	}
	ev := &airlock.Event{Type: typ, TenantID: s.TenantID, SessionID: s.ID, At: m.cfg.Now().UTC(), Reason: reason, Detail: detail, Data: data}
	q := &m.events
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		if err := m.cfg.Events.RecordEvent(context.WithoutCancel(ctx), ev); err != nil {
			m.cfg.Logger.Error("record session event", "session", s.ID, "type", typ, "err", err)
		}
		return
	}
	if len(q.pending) >= maxQueuedEvents {
		q.mu.Unlock()
		m.cfg.Logger.Error("session event dropped: the queue is full", "session", s.ID, "type", typ)
		return
	}
	q.pending = append(q.pending, ev)
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// emitEnded records the end of s: session.abuse_killed when an abuse
// detector ended it, else session.ended; the reason is its end_reason.
func (m *Manager) emitEnded(ctx context.Context, s *airlock.Session) {
	typ := airlock.EventSessionEnded
	if strings.HasPrefix(s.EndReason, airlock.AbusePrefix) {
		typ = airlock.EventSessionAbuseKilled
	}
	m.emit(ctx, s, typ, s.EndReason, s.EndDetail, map[string]any{"state": string(s.State)})
}

// emitMove records the event of a live session's move from prev to its
// state now (l.mu held).
func (m *Manager) emitMove(ctx context.Context, l *live, prev airlock.SessionState) {
	rec := &l.rec
	switch {
	case prev == airlock.SessionCreating && rec.State == airlock.SessionReady:
		m.emit(ctx, rec, airlock.EventSessionCreated, "", "", nil)
	case prev == airlock.SessionPaused && rec.State == airlock.SessionReady:
		m.emit(ctx, rec, airlock.EventSessionResumed, l.resumedBy, "", nil)
	case rec.State == airlock.SessionPaused:
		m.emit(ctx, rec, airlock.EventSessionPaused, l.pausedBy, "", nil)
	case rec.State.Final():
		m.emitEnded(ctx, rec)
	}
}
