package manager

import (
	"context"
	"fmt"

	"github.com/airlockhq/airlock"
)

// sandboxFor gets a sandbox for a request: a ready pool member, else one
// restored from the base snapshot, else a cold boot (whose runtime is not
// readied: the program then starts as it would anywhere).
func (m *Manager) sandboxFor(ctx context.Context, k warmKey, id string, labels map[string]string) (airlock.Sandbox, string, error) {
	if sb := m.pool.take(k); sb != nil {
		return sb, airlock.StartPool, nil
	}
	if sb, err := m.restore(ctx, k, id, labels); err == nil && sb != nil {
		return sb, airlock.StartRestore, nil
	}
	sb, err := m.cfg.Backend.Create(ctx, airlock.SandboxSpec{ID: id, Image: k.img, Limits: m.cfg.Limits, Labels: labels})
	if err != nil {
		return nil, "", fmt.Errorf("create sandbox: %w", err)
	}
	return sb, airlock.StartCold, nil
}

// restore restores a sandbox of k from its base snapshot; nil, nil when
// there is no snapshot (yet). A snapshot that fails to restore is
// discarded and rebuilt.
func (m *Manager) restore(ctx context.Context, k warmKey, id string, labels map[string]string) (airlock.Sandbox, error) {
	if m.snaps == nil {
		return nil, nil
	}
	dir := m.snaps.get(k)
	if dir == "" {
		return nil, nil
	}
	sb, err := m.cfg.Backend.(airlock.Snapshotter).Restore(ctx, airlock.SandboxSpec{ID: id, Image: k.img, Limits: m.cfg.Limits, Labels: labels}, dir)
	if err != nil {
		if ctx.Err() == nil {
			m.snaps.markBad(k, err)
		}
		return nil, err
	}
	return sb, nil
}

// ready makes a pool member of k: restored from the snapshot, or booted
// cold and readied by the recipe.
func (m *Manager) ready(ctx context.Context, k warmKey, id string) (airlock.Sandbox, string, error) {
	labels := map[string]string{"airlock.pool": k.name()}
	if sb, err := m.restore(ctx, k, id, labels); err == nil && sb != nil {
		return sb, airlock.StartRestore, nil
	}
	sb, err := m.cfg.Backend.Create(ctx, airlock.SandboxSpec{ID: id, Image: k.img, Limits: m.cfg.Limits, Labels: labels})
	if err != nil {
		return nil, "", err
	}
	if err := prepare(ctx, sb, k.recipe); err != nil {
		sb.Destroy(context.WithoutCancel(ctx))
		return nil, "", err
	}
	return sb, airlock.StartCold, nil
}
