package main

import (
	"context"
	"flag"
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

// quotaOptions are the operator's default tenant quotas.
type quotaOptions struct {
	defaults quota.Limits
	flush    time.Duration
}

func (o *quotaOptions) register(fs *flag.FlagSet) {
	o.defaults = quota.Limits{}
	fs.Func("quota", "default quota of every tenant, KEY=VALUE (repeatable); keys: sessions, runs, executions_per_minute, vcpu, memory, sandbox_seconds_per_day, egress_bytes_per_day; VALUE a number (vcpu may be 0.5; memory and egress take KiB/MiB/GiB; seconds take 8h) or unlimited. 'airlock tenant set NAME --quota KEY=VALUE' overrides one for a tenant", func(v string) error {
		k, n, err := quota.ParseAssignment(v)
		if err != nil {
			return err
		}
		o.defaults[k] = n
		return nil
	})
	fs.DurationVar(&o.flush, "quota-flush", 10*time.Second, "how often the day's quota counters are written to the store and tenants' overrides read again (what a crash may lose of the daily counts)")
}

// newQuotas makes the node's ledger of tenant quotas and reads the store.
// maxPerTenant is --max-sessions-per-tenant: the sessions quota's
// default unless --quota sessions=... names one.
// The defaults are written to the state directory for 'airlock tenant'
// to show.
func newQuotas(ctx context.Context, o quotaOptions, maxPerTenant int, stateDir string, store airlock.QuotaStore, metrics prometheus.Registerer, logger *slog.Logger) (*quota.Ledger, error) {
	defaults := quota.Limits{}
	for k, v := range o.defaults {
		defaults[k] = v
	}
	if _, set := defaults[quota.Sessions]; !set && maxPerTenant > 0 {
		defaults[quota.Sessions] = int64(maxPerTenant)
	}
	l, err := quota.New(quota.Config{Defaults: defaults, Store: store, FlushInterval: o.flush, Metrics: metrics, Logger: logger})
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

// quotaNames are the quotas the admin API may override for a tenant.
func quotaNames() []string {
	var out []string
	for _, k := range quota.Keys() {
		out = append(out, string(k))
	}
	return out
}
