package session

import (
	"context"
	"strings"
	"time"

	"github.com/airlockhq/airlock"
)

// Events lost by a crash. The events of transitions are queued in memory
// (events.go) and a server killed before its writer wrote them loses
// them, while the session's record, written under its lock, has the
// transition. So Recover first compares each session's record with the
// newest event of it in the feed (airlock.SessionEventGaps) and writes
// the events of the transitions that are missing, marked with
// airlock.RecoveredData, before anything else of the start emits an
// event: the feed keeps each session's events in the order they
// happened. The session's lock stays free of event writes.

// recoverEventsWithin is how long ago a session may have ended (or, when
// it has no event at all, have been made) for its events to be
// recovered: older ones had their events pruned, or predate events.
const recoverEventsWithin = 24 * time.Hour

// recoverEvents writes the events a crash of the previous run lost.
func (m *Manager) recoverEvents(ctx context.Context) {
	gaps, ok := m.cfg.Events.(airlock.SessionEventGaps)
	if !ok {
		return
	}
	now := m.cfg.Now().UTC()
	since := now.Add(-recoverEventsWithin)
	all, err := gaps.LastSessionEvents(ctx, since)
	if err != nil {
		m.cfg.Logger.Error("compare sessions with their events; events a crash lost are not recovered", "err", err)
		return
	}
	n := 0
	for _, g := range all {
		s := g.Session
		if g.LastType == "" && s.CreatedAt.Before(since) {
			continue // its events were pruned
		}
		for _, typ := range missingEvents(s, g.LastType) {
			ev := &airlock.Event{Type: typ, TenantID: s.TenantID, SessionID: s.ID, At: now,
				Data: map[string]any{airlock.RecoveredData: true}}
			switch typ {
			case airlock.EventSessionEnded, airlock.EventSessionAbuseKilled:
				ev.Reason, ev.Detail = s.EndReason, s.EndDetail
				ev.Data["state"] = string(s.State)
				if s.EndedAt != nil {
					ev.At = s.EndedAt.UTC()
				}
			case airlock.EventSessionCreated:
				ev.At = s.CreatedAt.UTC()
			}
			m.writeEvent(ev)
			n++
		}
	}
	if n > 0 {
		m.cfg.Logger.Warn("session events lost by a crash of the previous run were recovered", "events", n)
	}
}

// missingEvents are the events to write, in order, for a session whose
// newest event is of type last ("" for none). A session being made or
// destroyed is left to Recover, which ends it and records its end.
func missingEvents(s *airlock.Session, last string) []string {
	state := s.State
	switch {
	case state == airlock.SessionReady || state == airlock.SessionBusy:
		switch last {
		case "":
			return []string{airlock.EventSessionCreated}
		case airlock.EventSessionPaused:
			return []string{airlock.EventSessionResumed}
		}
	case state == airlock.SessionPaused:
		switch last {
		case "":
			return []string{airlock.EventSessionCreated, airlock.EventSessionPaused}
		case airlock.EventSessionCreated, airlock.EventSessionResumed:
			return []string{airlock.EventSessionPaused}
		}
	case state.Final():
		switch last {
		case airlock.EventSessionEnded, airlock.EventSessionAbuseKilled:
		default:
			// A session that failed while being made has no created
			// event; one that ran and whose creation was lost too gets
			// only its end (the start cannot tell them apart).
			if strings.HasPrefix(s.EndReason, airlock.AbusePrefix) {
				return []string{airlock.EventSessionAbuseKilled}
			}
			return []string{airlock.EventSessionEnded}
		}
	}
	return nil
}
