package node

import (
	"context"
	"fmt"
	"time"
)

// recover takes back what an earlier run left, in this order: the
// sessions whose sandboxes kept running (mapped in the fleet), then every
// other sandbox and network is ended, and the one-shot runs it left are
// recorded as failed. Then the pool is readied and the default tenant
// made on an empty store.
func (n *Node) recover(ctx context.Context) error {
	if !n.parts.noRecovery {
		if err := n.takeBack(ctx); err != nil {
			return err
		}
	}
	if err := n.OneShot.Warm(ctx, n.cfg.Warm); err != nil {
		return err
	}
	if err := warmSessions(ctx, n.cfg.Sessions, n.Sessions, n.logger); err != nil {
		return err
	}
	if err := n.Provisioner.Start(ctx); err != nil {
		return err
	}
	n.onClose(n.closeWithin(time.Minute, "stopping the provisioner", n.Provisioner.Close))
	n.onClose(n.stopSessions)
	if n.parts.noDefaultTenant {
		return nil
	}
	if err := bootstrapTenant(ctx, n.Store, n.cfg.StateDir, n.logger); err != nil {
		return err
	}
	return bootstrapAdmin(ctx, n.Store, n.cfg.StateDir, n.logger)
}

// takeBack ends or takes back what an earlier run left: the sessions
// whose sandboxes kept running (mapped in the fleet), then every other
// sandbox and network, and records the one-shot runs it left as failed.
func (n *Node) takeBack(ctx context.Context) error {
	if err := recoverSessions(ctx, n.Sessions, n.logger); err != nil {
		return err
	}
	if n.Fleet != nil {
		if err := n.Fleet.Adopt(ctx); err != nil {
			return fmt.Errorf("fleet: mapping the recovered sessions: %w", err)
		}
	}
	if _, err := n.Provisioner.Reconcile(ctx); err != nil {
		return fmt.Errorf("reconcile: %w", err)
	}
	if err := reconcileEgress(ctx, n.Egress, n.logger); err != nil {
		return err
	}
	if _, err := n.OneShot.FailInterrupted(ctx); err != nil {
		return fmt.Errorf("reconcile: %w", err)
	}
	return nil
}
