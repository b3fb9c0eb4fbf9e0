package manager

import (
	"context"
	"fmt"

	"github.com/airlockhq/airlock"
)

// backends returns the node's backends, the default first.
func (m *Manager) backends() []airlock.Backend {
	return append([]airlock.Backend{m.cfg.Backend}, m.cfg.Backends...)
}

// backendFor picks the backend of a request by the tenant's isolation
// floor and the level the request asked for, from the backends'
// Capabilities (airlock.ChooseBackend).
func (m *Manager) backendFor(t *airlock.Tenant, want airlock.Isolation) (airlock.Backend, error) {
	return airlock.ChooseBackend(m.backends(), t, want)
}

// sandboxOn gets a sandbox from backend b: the default backend's come
// from the warm pool, a snapshot or a cold boot (sandboxFor); the others
// start fresh, which takes them milliseconds.
func (m *Manager) sandboxOn(ctx context.Context, b airlock.Backend, k warmKey, id string, labels map[string]string) (airlock.Sandbox, string, error) {
	if b == m.cfg.Backend {
		return m.sandboxFor(ctx, k, id, labels)
	}
	sb, err := b.Create(ctx, airlock.SandboxSpec{ID: id, Image: k.img, Limits: m.cfg.Limits, Labels: labels})
	if err != nil {
		return nil, "", fmt.Errorf("create sandbox on %s: %w", b.Name(), err)
	}
	return sb, airlock.StartCold, nil
}
