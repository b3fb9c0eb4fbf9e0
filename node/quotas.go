package node

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/service/egress"
	"github.com/airlockhq/airlock/service/quota"
)

var _ egress.TenantMeter = (*quota.Ledger)(nil)

// QuotaConfig are the operator's default tenant quotas.
type QuotaConfig struct {
	Defaults quota.Limits
	// Flush is how often the day's counters are written to the store.
	Flush time.Duration
	// FlushGap is the least time between two writes (default 1 s).
	FlushGap time.Duration
}

// newQuotas makes the node's ledger of tenant quotas and reads the store.
// maxPerTenant is --max-sessions-per-tenant: the sessions quota's
// default unless --quota sessions=... names one.
// The defaults are written to the state directory for 'airlock tenant'
// to show.
func newQuotas(ctx context.Context, o QuotaConfig, maxPerTenant int, stateDir string, store airlock.QuotaStore, metrics prometheus.Registerer, logger *slog.Logger) (*quota.Ledger, error) {
	defaults := quota.Limits{}
	for k, v := range o.Defaults {
		defaults[k] = v
	}
	if _, set := defaults[quota.Sessions]; !set && maxPerTenant > 0 {
		defaults[quota.Sessions] = int64(maxPerTenant)
	}
	l, err := quota.New(quota.Config{Defaults: defaults, Store: store, FlushInterval: o.Flush, FlushGap: o.FlushGap, Metrics: metrics, Logger: logger})
	if err != nil {
		return nil, err
	}
	if err := quota.WriteDefaults(filepath.Join(stateDir, quota.DefaultsFile), defaults); err != nil {
		return nil, fmt.Errorf("write the quota defaults: %w", err)
	}
	if err := l.Start(ctx); err != nil {
		return nil, err
	}
	logger.Info("tenant quotas", "defaults", defaults.String())
	return l, nil
}
