package session

import (
	"context"
	"strconv"

	"github.com/airlockhq/airlock"
)

var _ airlock.SessionNetworkService = (*Manager)(nil)

// networkOf returns the network of a live session's sandbox, or nil.
func networkOf(sb airlock.Sandbox) airlock.NetworkAttachment {
	if n, ok := sb.(airlock.NetworkedSandbox); ok {
		return n.Network()
	}
	return nil
}

// SetSessionNetwork replaces the network policy of a live session: new
// connections and queries follow it at once, and open connections it
// denies are closed. The mode may change between allow_list and none (no
// internet; the broker stays if the session holds scopes) only for a
// session created with a network: a sandbox started without one cannot
// get one later.
func (m *Manager) SetSessionNetwork(ctx context.Context, tenant *airlock.Tenant, id string, p airlock.NetworkPolicy) (*airlock.Session, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	l, err := m.lookup(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	state, sb := l.rec.State, l.sb()
	l.mu.Unlock()
	switch {
	case state == airlock.SessionCreating:
		return nil, airlock.Problem(airlock.ECONFLICT, "session-not-ready", "session %s is still being created", id)
	case !state.Live():
		l.mu.Lock()
		rec := l.rec
		l.mu.Unlock()
		return nil, ended(&rec)
	}
	att := networkOf(sb)
	if att == nil {
		return nil, airlock.Problem(airlock.ECONFLICT, "network-fixed",
			"session %s was created without a network, and a running sandbox cannot get one: create the session with network mode \"allow_list\" (an empty list is fine) to change its list later", id)
	}
	if err := att.SetPolicy(ctx, p); err != nil {
		return nil, err
	}
	l.mu.Lock()
	l.rec.Network = p
	m.persist(ctx, l)
	l.mu.Unlock()
	return m.snapshot(ctx, l), nil
}

// flusher is implemented by egress services that buffer their log.
type flusher interface{ Flush(ctx context.Context) }

// SessionEgress returns a page of a session's egress audit log, newest
// first. Another tenant's session is not found.
func (m *Manager) SessionEgress(ctx context.Context, tenant *airlock.Tenant, id string, f airlock.EgressFilter) (*airlock.EgressPage, error) {
	if _, err := m.Session(ctx, tenant, id); err != nil {
		return nil, err
	}
	if m.cfg.EgressLog == nil {
		return &airlock.EgressPage{Events: []*airlock.EgressEvent{}}, nil
	}
	if fl, ok := m.cfg.Egress.(flusher); ok {
		fl.Flush(ctx)
	}
	f.TenantID, f.SessionID, f.ExecutionID = tenant.ID, id, ""
	if f.Limit <= 0 {
		f.Limit = 100
	}
	evs, err := m.cfg.EgressLog.ListEgress(ctx, f)
	if err != nil {
		return nil, err
	}
	page := &airlock.EgressPage{Events: evs}
	if len(evs) == f.Limit {
		page.NextCursor = strconv.FormatInt(evs[len(evs)-1].Seq, 10)
	}
	return page, nil
}
