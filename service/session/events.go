package session

import (
	"context"
	"strings"

	"github.com/airlockhq/airlock"
)

// Events of the session lifecycle: every transition that matters to a
// tenant (created, paused, resumed, ended with its reason, killed by an
// abuse detector) is recorded through Config.Events, which queues it
// for the tenant's webhooks. A failed write is logged; the session goes
// on (its record is the truth).

// emit records an event about session s.
func (m *Manager) emit(ctx context.Context, s *airlock.Session, typ, reason, detail string, data map[string]any) {
	if m.cfg.Events == nil {
		return
	}
	ev := &airlock.Event{Type: typ, TenantID: s.TenantID, SessionID: s.ID, At: m.cfg.Now().UTC(), Reason: reason, Detail: detail, Data: data}
	if err := m.cfg.Events.RecordEvent(context.WithoutCancel(ctx), ev); err != nil {
		m.cfg.Logger.Error("record session event", "session", s.ID, "type", typ, "err", err)
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
