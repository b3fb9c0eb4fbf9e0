package session

import (
	"context"
	"net"
	"time"

	"github.com/airlockhq/airlock"
)

// PreviewTarget returns a live session this node holds: the tenant's,
// or with a nil tenant anyone's (the preview service has decided who
// may reach it). With a tenant, a paused session whose lifecycle has
// auto_resume is resumed first, as for an exec; without auto_resume it
// is session-paused (409). A session that is not held here, ended or not ready is
// a problem as for any call; a sandbox whose agent cannot reach ports is
// 501 preview-unsupported.
func (m *Manager) PreviewTarget(ctx context.Context, tenant *airlock.Tenant, id string) (*airlock.PreviewTarget, error) {
	m.mu.Lock()
	l := m.live[id]
	m.mu.Unlock()
	if l == nil {
		if tenant == nil {
			return nil, notFound(id)
		}
		// Paused with auto_resume: resumed now, the request waits.
		// Otherwise ended, paused, not held: as for any call.
		var err error
		if l, err = m.lookupLive(ctx, tenant, id); err != nil {
			return nil, err
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if tenant != nil && l.rec.TenantID != tenant.ID {
		return nil, notFound(id)
	}
	switch l.rec.State {
	case airlock.SessionReady, airlock.SessionBusy:
	case airlock.SessionCreating:
		return nil, airlock.Problem(airlock.ECONFLICT, "session-not-ready", "session %s is still being created", id)
	case airlock.SessionPaused:
		return nil, pausedProblem(id)
	default:
		rec := l.rec
		return nil, ended(&rec)
	}
	if l.pausing {
		return nil, airlock.Problem(airlock.ECONFLICT, "session-pausing", "session %s is being paused", id)
	}
	sb := l.sb()
	if sb == nil {
		return nil, notFound(id)
	}
	ports, ok := sb.Agent().(airlock.AgentPorts)
	if !ok {
		return nil, airlock.Problem(airlock.ENOTIMPLEMENTED, "preview-unsupported", "the sandbox of session %s cannot serve preview URLs", id)
	}
	// A preview request is activity: the session's idle time starts over.
	l.rec.LastActiveAt = m.cfg.Now().UTC()
	return &airlock.PreviewTarget{
		TenantID:  l.rec.TenantID,
		SessionID: id,
		Dial: func(ctx context.Context, port int) (net.Conn, error) {
			ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			return ports.DialPort(ctx, port)
		},
		Ended: l.ended,
	}, nil
}

var _ airlock.PreviewTargets = (*Manager)(nil)
