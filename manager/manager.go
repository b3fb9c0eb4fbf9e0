package manager

import (
	"context"
	"time"

	"github.com/airlockhq/airlock"
)

// Manager runs one-shot executions on this node.
type Manager struct {
	cfg   Config
	slots chan struct{}
}

var _ airlock.Executor = (*Manager)(nil)

// New returns a manager.
func New(cfg Config) (*Manager, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Manager{cfg: cfg, slots: make(chan struct{}, cfg.MaxConcurrent)}, nil
}

// acquire takes an execution slot, waiting up to QueueTimeout.
func (m *Manager) acquire(ctx context.Context) error {
	t := time.NewTimer(m.cfg.QueueTimeout)
	defer t.Stop()
	select {
	case m.slots <- struct{}{}:
		return nil
	case <-t.C:
		return airlock.Problem(airlock.EUNAVAILABLE, "node-busy", "all %d execution slots of this node are busy; retry later", cap(m.slots))
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (m *Manager) release() { <-m.slots }

// Reconcile ends whatever a crashed server left: sandboxes the backend
// still has and executions recorded as running. Call it once at start,
// before serving.
func (m *Manager) Reconcile(ctx context.Context) error {
	ids, err := m.cfg.Backend.Reconcile(ctx)
	if len(ids) > 0 {
		m.cfg.Logger.Warn("reconciler ended sandboxes left by an earlier run", "count", len(ids), "ids", ids)
	}
	if err != nil {
		return err
	}
	n, err := m.cfg.Store.FailRunningExecutions(ctx, "interrupted: the server stopped while this execution ran")
	if n > 0 {
		m.cfg.Logger.Warn("reconciler marked interrupted executions failed", "count", n)
	}
	return err
}
