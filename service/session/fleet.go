package session

import (
	"context"
	"os"

	"github.com/airlockhq/airlock"
)

// Held lists the sessions this node has: those it holds a sandbox for
// now, and those its own records say are live, paused or being
// destroyed (the store's LiveSessions, which is this node's alone). A
// session the fleet already recorded lost is still held while its
// sandbox is here.
func (m *Manager) Held(ctx context.Context) ([]string, error) {
	recs, err := m.cfg.Sessions.LiveSessions(ctx)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	ids := make([]string, 0, len(recs))
	for _, s := range recs {
		seen[s.ID] = true
		ids = append(ids, s.ID)
	}
	m.mu.Lock()
	for id := range m.live {
		if !seen[id] {
			ids = append(ids, id)
		}
	}
	m.mu.Unlock()
	return ids, nil
}

// Abandon destroys the sandbox of a session its node no longer holds for
// the fleet (the node's lease expired) and records the session lost,
// end reason node_lost. A session without a sandbox here (paused, or
// left by an earlier run) has its saved sandbox removed and its record
// made lost. A record the fleet's reaper already made lost stays as it
// is.
func (m *Manager) Abandon(ctx context.Context, id, detail string) error {
	ctx = context.WithoutCancel(ctx)
	m.mu.Lock()
	l := m.live[id]
	m.mu.Unlock()
	if l != nil {
		return m.destroy(ctx, l, airlock.SessionLost, airlock.EndNodeLost, detail)
	}
	recs, err := m.cfg.Sessions.LiveSessions(ctx)
	if err != nil {
		return err
	}
	for _, s := range recs {
		if s.ID != id {
			continue
		}
		if s.State == airlock.SessionPaused && m.cfg.Keep.Store != nil {
			if p, err := m.cfg.Keep.Store.Pause(ctx, s.TenantID, s.ID); err == nil {
				os.RemoveAll(p.Dir)
			}
			_ = m.cfg.Keep.Store.DeletePause(ctx, s.ID)
		}
		now := m.cfg.Now().UTC()
		s.State, s.EndReason, s.EndDetail, s.EndedAt = airlock.SessionLost, airlock.EndNodeLost, detail, &now
		if err := m.cfg.Sessions.UpdateSession(ctx, s); err != nil && airlock.ErrorCode(err) != airlock.ECONFLICT {
			return err
		} else if err == nil {
			m.emitEnded(ctx, s)
		}
	}
	return nil
}
