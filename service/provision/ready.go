package provision

import (
	"context"
	"fmt"

	"github.com/airlockhq/airlock"
)

// sandboxFor gets a sandbox of a warm key: a ready pool member, else one
// restored from the base snapshot, else a cold boot (whose runtime is not
// readied: the program then starts as it would anywhere).
//
// A miss waits for whichever comes first: the next pool member readied
// for k, or one of the node's starts (MaxStarts) to make its own. Under
// load that queues requests for ready sandboxes instead of piling up
// restores that starve each other.
func (p *Provisioner) sandboxFor(ctx context.Context, k warmKey, id string, labels map[string]string) (airlock.Sandbox, string, error) {
	if sb := p.pool.take(k); sb != nil {
		return sb, airlock.StartPool, nil
	}
	member, cancel, waiting := p.pool.wait(k)
	if !waiting {
		if !p.startSlot(ctx) {
			return nil, "", ctx.Err()
		}
		defer p.endStart()
		return p.make(ctx, k, id, labels)
	}
	select {
	case sb := <-member:
		return sb, airlock.StartPool, nil
	case p.starts <- struct{}{}:
		if sb := cancel(); sb != nil { // a member came at the same moment
			p.endStart()
			return sb, airlock.StartPool, nil
		}
		defer p.endStart()
		return p.make(ctx, k, id, labels)
	case <-ctx.Done():
		if sb := cancel(); sb != nil {
			p.destroyLater(sb, nil)
		}
		return nil, "", ctx.Err()
	}
}

// make makes a sandbox of k for a request: restored from the base
// snapshot where the recipe restores, else booted (without readying the
// runtime: the program then starts as it would anywhere).
func (p *Provisioner) make(ctx context.Context, k warmKey, id string, labels map[string]string) (airlock.Sandbox, string, error) {
	if sb, err := p.restore(ctx, k, id, labels); err == nil && sb != nil {
		return sb, airlock.StartRestore, nil
	}
	sb, err := k.backend.Create(ctx, airlock.SandboxSpec{ID: id, Image: k.img, Limits: k.limits, Labels: labels})
	if err != nil {
		return nil, "", fmt.Errorf("create sandbox on %s: %w", k.backend.Name(), err)
	}
	if err := startImage(ctx, sb, k.img); err != nil {
		return nil, "", err
	}
	return sb, airlock.StartCold, nil
}

// restore restores a sandbox of k from its base snapshot; nil, nil when
// there is no snapshot (yet). A snapshot that fails to restore is
// discarded and rebuilt.
func (p *Provisioner) restore(ctx context.Context, k warmKey, id string, labels map[string]string) (airlock.Sandbox, error) {
	if p.snaps == nil || !k.restores() {
		return nil, nil
	}
	dir := p.snaps.get(k)
	if dir == "" {
		return nil, nil
	}
	sb, err := k.backend.(airlock.Snapshotter).Restore(ctx, airlock.SandboxSpec{ID: id, Image: k.img, Limits: k.limits, Labels: labels}, dir)
	if err != nil {
		if ctx.Err() == nil {
			p.snaps.markBad(k, err)
		}
		return nil, err
	}
	return sb, nil
}

// ready makes a pool member of k: restored from the snapshot, or booted
// cold and readied by the recipe; plain, booted without the recipe's
// runtime (see pool.behind).
func (p *Provisioner) ready(ctx context.Context, k warmKey, id string, plain bool) (airlock.Sandbox, string, error) {
	labels := map[string]string{"airlock.pool": k.name()}
	if sb, err := p.restore(ctx, k, id, labels); err == nil && sb != nil {
		// Its ready context, restored from the one snapshot every
		// member shares, gets its own random state now, while it waits
		// in the pool, instead of when a session takes it.
		if k.recipe.Context != "" {
			if _, err := p.reseedContext(ctx, sb, k.recipe.Context, func(string) bool { return false }); err != nil {
				sb.Destroy(context.WithoutCancel(ctx))
				return nil, "", fmt.Errorf("reseed the restored member's context: %w", err)
			}
		}
		return sb, airlock.StartRestore, nil
	}
	sb, err := k.backend.Create(ctx, airlock.SandboxSpec{ID: id, Image: k.img, Limits: k.limits, Labels: labels})
	if err != nil {
		return nil, "", err
	}
	if err := startImage(ctx, sb, k.img); err != nil {
		return nil, "", err
	}
	if plain {
		return sb, airlock.StartCold, nil
	}
	if err := prepare(ctx, sb, k, false); err != nil {
		sb.Destroy(context.WithoutCancel(ctx))
		return nil, "", err
	}
	return sb, airlock.StartCold, nil
}
