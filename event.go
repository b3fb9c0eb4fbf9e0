package airlock

import (
	"context"
	"time"
)

// Events: every transition of a session (created, paused, resumed,
// ended with its reason, killed by an abuse detector) and every abuse
// detector decision is an event with a stable ID, kept in the store,
// read with a cursor (GET /v1/events?cursor=) and sent to the tenant's
// webhooks.

// Event types.
const (
	EventSessionCreated     = "session.created"
	EventSessionPaused      = "session.paused"
	EventSessionResumed     = "session.resumed"
	EventSessionEnded       = "session.ended"
	EventSessionAbuseKilled = "session.abuse_killed"
	EventAbuseDetected      = "abuse.detected"
)

// EventTypes lists every event type, in lifecycle order.
var EventTypes = []string{EventSessionCreated, EventSessionPaused, EventSessionResumed, EventSessionEnded, EventSessionAbuseKilled, EventAbuseDetected}

// ValidEventType reports whether t is a known event type.
func ValidEventType(t string) bool {
	for _, x := range EventTypes {
		if x == t {
			return true
		}
	}
	return false
}

// Event is one thing that happened to a tenant's session.
type Event struct {
	ID        string    `json:"id"`
	Type      string    `json:"type"`
	TenantID  string    `json:"tenant_id"`
	SessionID string    `json:"session_id,omitempty"`
	At        time.Time `json:"at"`
	// Reason is why (session.ended, session.abuse_killed: the session's
	// end_reason; session.paused: "timeout", "idle" or "request").
	Reason string `json:"reason,omitempty"`
	Detail string `json:"detail,omitempty"`
	// Data holds what else the type carries (abuse.detected: detector,
	// action, summary; session.paused: paused_bytes).
	Data map[string]any `json:"data,omitempty"`
}

// Why a session was paused (Event.Reason of session.paused).
const (
	PauseByRequest = "request" // POST /v1/sessions/{id}/pause
	PauseByTimeout = "timeout" // its timeout passed with on_timeout pause
	PauseByIdle    = "idle"    // its idle timeout passed with on_timeout pause
)

// EventFilter selects events oldest first after a cursor, or (Newest)
// newest first before it. An empty TenantID (the operator's view)
// selects every tenant's; a SessionID only that session's.
type EventFilter struct {
	TenantID  string
	SessionID string
	// After is the cursor, an event ID: oldest first, the events after
	// it ("" from the oldest kept); with Newest, the events before it
	// ("" from the newest).
	After  string
	Newest bool
	Limit  int
}

// EventPage is one page of events, oldest first. NextCursor is the ID of
// the last event of the page (the cursor given when the page is empty):
// pass it back to read on.
type EventPage struct {
	Events     []*Event `json:"events"`
	NextCursor string   `json:"next_cursor"`
}

// EventStore keeps events. Recording one also queues its delivery to
// each of the tenant's webhooks that takes its type, in one transaction.
type EventStore interface {
	RecordEvent(ctx context.Context, ev *Event) error
	// ListEvents returns up to f.Limit events after f.After, oldest
	// first (with f.Newest: before it, newest first). A cursor that is
	// not one of the tenant's events is EINVALID.
	ListEvents(ctx context.Context, f EventFilter) ([]*Event, error)
}

// SessionEventGaps is implemented by an event store that can compare the
// sessions' records with their events, so that a server that crashed
// with session events queued in memory writes, at its next start, the
// transitions whose events were lost (marked RecoveredData).
type SessionEventGaps interface {
	// LastSessionEvents returns this node's sessions that are live, or
	// ended at or after since, each with the type of its newest event in
	// the feed ("" for none).
	LastSessionEvents(ctx context.Context, since time.Time) ([]SessionLastEvent, error)
}

// SessionLastEvent is a session's record and its newest event's type.
type SessionLastEvent struct {
	Session  *Session
	LastType string
}

// RecoveredData is the key of Event.Data that marks an event written at
// a start of the server for a transition whose event the server lost
// when it crashed (its At is the transition's time where the record
// keeps it, else the start's).
const RecoveredData = "recovered"

// EventSink takes the events of a service; the node's is the store.
type EventSink interface {
	RecordEvent(ctx context.Context, ev *Event) error
}

// PruneCount says how many rows a prune deleted.
type PruneCount struct {
	Events     int64 `json:"events"`
	Deliveries int64 `json:"deliveries"`
}

// EventPruner deletes what is older than the retention: events and
// webhook deliveries before a time.
type EventPruner interface {
	PruneEvents(ctx context.Context, before time.Time) (PruneCount, error)
}
