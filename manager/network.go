package manager

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/airlockhq/airlock"
)

// checkNetwork refuses an execution that asks for a network this node or
// tenant cannot give: no egress, a backend without networks, or no
// default allow list for the tenant.
func (m *Manager) checkNetwork(t *airlock.Tenant, b airlock.Backend, req airlock.ExecuteRequest) error {
	if !req.AllowNetwork {
		return nil
	}
	if m.cfg.Egress == nil {
		return airlock.Problem(airlock.EFORBIDDEN, "network-unavailable", "allow_network: this node has no egress proxy, so sandboxes here have no network")
	}
	if !slices.Contains(b.Capabilities().NetworkModes, airlock.NetworkAllowList) {
		return airlock.Problem(airlock.EFORBIDDEN, "network-unavailable", "allow_network: the %s backend cannot give a sandbox a network", b.Name())
	}
	if len(m.allowFor(t)) == 0 {
		return airlock.Problem(airlock.EFORBIDDEN, "network-unavailable",
			"allow_network: tenant %s has no default allow list; the operator sets one (airlockd --network-allow %s=host,...)", t.Name, t.Name)
	}
	return nil
}

func (m *Manager) allowFor(t *airlock.Tenant) []string {
	if m.cfg.NetworkAllow == nil {
		return nil
	}
	return m.cfg.NetworkAllow(t)
}

// sandboxWithNetwork gets the sandbox of an execution: from sandboxOn
// (pool, snapshot or boot) without a network; with one, a sandbox booted
// in a network made for this execution (pool members and snapshots have
// none), which is removed with the sandbox.
func (m *Manager) sandboxWithNetwork(ctx context.Context, b airlock.Backend, k warmKey, e *airlock.Execution, req airlock.ExecuteRequest, labels map[string]string) (airlock.Sandbox, string, error) {
	if !req.AllowNetwork {
		return m.sandboxOn(ctx, b, k, "ex-"+e.ID, labels)
	}
	tenant, err := m.cfg.Store.TenantByID(ctx, e.TenantID)
	if err != nil {
		return nil, "", err
	}
	att, err := m.cfg.Egress.Attach(ctx, airlock.NetworkRequest{
		TenantID:    e.TenantID,
		ExecutionID: e.ID,
		Policy:      airlock.NetworkPolicy{Mode: airlock.NetworkAllowList, Allow: m.allowFor(tenant)},
	})
	if err != nil {
		return nil, "", fmt.Errorf("make the sandbox's network: %w", err)
	}
	sb, err := b.Create(ctx, airlock.SandboxSpec{ID: "ex-" + e.ID, Image: k.img, Limits: m.cfg.Limits, Labels: labels, Network: att.Sandbox()})
	if err != nil {
		return nil, "", errors.Join(fmt.Errorf("create sandbox on %s: %w", b.Name(), err), att.Close(context.WithoutCancel(ctx)))
	}
	return airlock.WithNetwork(sb, att), airlock.StartCold, nil
}
