package node

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/service/egress"
	"github.com/airlockhq/airlock/service/quota"
)

var _ egress.TenantMeter = (*quota.Ledger)(nil)

// QuotaConfig are the operator's default tenant quotas.
type QuotaConfig struct {
	Defaults quota.Limits
	// Flush is how often the day's counters are written to the store
	// (and, in a fleet, read back): what a crash may lose of the daily
	// counts, and how late one node sees another's (default 10 s; 2 s in
	// a fleet).
	Flush time.Duration
	// FlushGap is the least time between two writes (default 1 s).
	FlushGap time.Duration
}

// newQuotas makes the node's ledger of tenant quotas and reads the store.
// maxPerTenant is --max-sessions-per-tenant: the sessions quota's
// default unless --quota sessions=... names one.
// The defaults are written to the state directory for 'airlock tenant'
// to show. In a fleet the concurrent quotas and the executions per
// minute are counted in etcd for every node at once, and the day's
// counters are read back from the shared store at every flush; stop
// writes the counters and lets go of etcd.
func newQuotas(ctx context.Context, o QuotaConfig, fo FleetConfig, maxPerTenant int, stateDir string, store airlock.QuotaStore, metrics prometheus.Registerer, logger *slog.Logger) (l *quota.Ledger, stop func(context.Context) error, err error) {
	defaults := quota.Limits{}
	for k, v := range o.Defaults {
		defaults[k] = v
	}
	if _, set := defaults[quota.Sessions]; !set && maxPerTenant > 0 {
		defaults[quota.Sessions] = int64(maxPerTenant)
	}
	cfg := quota.Config{Defaults: defaults, Store: store, FlushInterval: o.Flush, FlushGap: o.FlushGap, Metrics: metrics, Logger: logger}
	if vs, ok := store.(interface {
		VolumeMiB(ctx context.Context, tenantID string) (int64, error)
	}); ok {
		cfg.Stored = func(ctx context.Context, tenantID string, k quota.Key) (int64, error) {
			if k != quota.VolumeBytes {
				return 0, nil
			}
			mib, err := vs.VolumeMiB(ctx, tenantID)
			return mib << 20, err
		}
	}
	var counters *quota.EtcdCounters
	var cli *clientv3.Client
	closeShared := func() {
		if counters != nil {
			counters.Close()
		}
		if cli != nil {
			cli.Close()
		}
	}
	if fo.enabled() {
		if cfg.FlushInterval == 0 {
			cfg.FlushInterval = fleetQuotaFlush
		}
		if cli, err = fo.client(); err != nil {
			return nil, nil, err
		}
		counters, err = quota.NewEtcdCounters(quota.EtcdConfig{Client: cli, NodeID: fo.NodeID, Prefix: fo.Prefix + "quota/", TTL: fo.LeaseTTL, Logger: logger})
		if err != nil {
			cli.Close()
			return nil, nil, err
		}
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		err = counters.Start(sctx)
		cancel()
		if err != nil {
			cli.Close()
			return nil, nil, err
		}
		cfg.Shared = counters
	}
	l, err = quota.New(cfg)
	if err != nil {
		closeShared()
		return nil, nil, err
	}
	if err := quota.WriteDefaults(filepath.Join(stateDir, quota.DefaultsFile), defaults); err != nil {
		closeShared()
		return nil, nil, fmt.Errorf("write the quota defaults: %w", err)
	}
	if err := l.Start(ctx); err != nil {
		closeShared()
		return nil, nil, err
	}
	logger.Info("tenant quotas", "defaults", defaults.String(), "shared", fo.enabled())
	return l, func(ctx context.Context) error {
		defer closeShared()
		return l.Close(ctx)
	}, nil
}

// fleetQuotaFlush is how often a fleet's node writes and reads back the
// day's counters unless --quota-flush says otherwise: what one node may
// use of a daily quota before the others see it.
const fleetQuotaFlush = 2 * time.Second

// quotaNames are the quotas the admin API may override for a tenant.
func quotaNames() []string {
	var out []string
	for _, k := range quota.Keys() {
		out = append(out, string(k))
	}
	return out
}
