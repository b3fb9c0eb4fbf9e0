package main

import (
	"context"
	"flag"
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
	fs.DurationVar(&o.flush, "quota-flush", 0, "how often the day's quota counters are written to the store (and, in a fleet, read back) and tenants' overrides read again: what a crash may lose of the daily counts, and how late one node sees another's (default 10s; 2s in a fleet)")
}

// newQuotas makes the node's ledger of tenant quotas and reads the store.
// maxPerTenant is --max-sessions-per-tenant: the sessions quota's
// default unless --quota sessions=... names one.
// The defaults are written to the state directory for 'airlock tenant'
// to show. In a fleet (--etcd) the concurrent quotas and the executions
// per minute are counted in etcd for every node at once, and the day's
// counters are read back from the shared store at every flush; stop
// writes the counters and lets go of etcd.
func newQuotas(ctx context.Context, o quotaOptions, fo fleetOptions, maxPerTenant int, stateDir string, store airlock.QuotaStore, metrics prometheus.Registerer, logger *slog.Logger) (l *quota.Ledger, stop func(context.Context) error, err error) {
	defaults := quota.Limits{}
	for k, v := range o.defaults {
		defaults[k] = v
	}
	if _, set := defaults[quota.Sessions]; !set && maxPerTenant > 0 {
		defaults[quota.Sessions] = int64(maxPerTenant)
	}
	cfg := quota.Config{Defaults: defaults, Store: store, FlushInterval: o.flush, Metrics: metrics, Logger: logger}
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
		counters, err = quota.NewEtcdCounters(quota.EtcdConfig{Client: cli, NodeID: fo.nodeID, Prefix: fo.prefix + "quota/", TTL: fo.leaseTTL, Logger: logger})
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
