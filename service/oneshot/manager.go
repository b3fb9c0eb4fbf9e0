package oneshot

import (
	"context"
	"fmt"
	"strings"

	"github.com/airlockhq/airlock"
)

// Manager runs one-shot executions on this node.
type Manager struct {
	cfg Config
}

var _ airlock.Executor = (*Manager)(nil)

// New returns a manager.
func New(cfg Config) (*Manager, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Manager{cfg: cfg}, nil
}

// Warm registers image/language pairs ("python-ds/python") with the
// provisioner under the one-shot limits, so their base snapshots are
// built and pool members kept ready. Pairs whose image is not built are
// logged and left out.
func (m *Manager) Warm(ctx context.Context, pairs []string) error {
	for _, w := range pairs {
		name, lang, ok := strings.Cut(w, "/")
		if !ok || !airlock.Language(lang).Valid() {
			return fmt.Errorf("manager: bad warm pair %q (want image/language)", w)
		}
		img, err := m.cfg.Images.Resolve(ctx, name)
		if err != nil {
			m.cfg.Logger.Warn("not readying a warm pair: its image is not available", "pair", w, "err", err)
			continue
		}
		m.cfg.Provisioner.Warm(img, airlock.Language(lang), m.cfg.Limits)
	}
	return nil
}

// FailInterrupted records every one-shot execution an earlier server
// left running as failed: it cannot have finished. Call it at start,
// after the sessions were recovered.
func (m *Manager) FailInterrupted(ctx context.Context) (int, error) {
	n, err := m.cfg.Store.FailRunningExecutions(ctx, "interrupted: the server stopped while this execution ran")
	if n > 0 {
		m.cfg.Logger.Warn("marked interrupted executions failed", "count", n)
	}
	return n, err
}
