package node

import (
	"context"
	"path/filepath"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/secretscan"
	"github.com/airlockhq/airlock/service/oneshot"
	"github.com/airlockhq/airlock/service/provision"
	"github.com/airlockhq/airlock/service/run"
)

// startServices makes the metrics registry, the quotas' ledger, the
// abuse monitor, the egress proxy (and its broker), the provisioner, the
// runner, the one-shot manager and the session manager.
func (n *Node) startServices(ctx context.Context) error {
	c := n.cfg
	n.Registry = prometheus.NewRegistry()
	n.Registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	// The quotas' counters are written last on the way out, after every
	// sandbox has ended or been left for the next start.
	var err error
	if n.Quotas, err = newQuotas(ctx, c.Quotas, c.Sessions.MaxPerTenant, c.StateDir, n.Store, n.Registry, n.logger); err != nil {
		return err
	}
	n.onClose(n.closeWithin(30*time.Second, "writing the quotas' counters", n.Quotas.Close))
	secrets := hostSecrets(c.StateDir, c.API.MetricsKey)
	c.Blobs.addSecrets(secrets)
	if n.Abuse, err = startAbuse(c.Abuse, n.Store, n.Registry, n.logger); err != nil {
		return err
	}
	if n.Abuse != nil {
		n.onClose(func() { n.Abuse.Close() })
	}
	if n.Egress, err = startEgress(c.Egress, c.StateDir, egressStoreOf(n.Abuse, n.Store), n.Quotas, secrets, n.logger); err != nil {
		return err
	}
	if n.Egress != nil { // closed after the sessions and the provisioner: their networks go first
		n.onClose(n.closeWithin(time.Minute, "stopping the egress proxy", n.Egress.Close))
	}
	if err := n.startProvisioner(secrets); err != nil {
		return err
	}
	keep, err := c.Keep.config(c.StateDir, n.Store, n.Blobs, n.logger)
	if err != nil {
		return err
	}
	n.Sessions, err = newSessions(c.Sessions, keep, n.Provisioner, n.Runner, n.Images, n.Store, egressOf(n.Egress), egressLogOf(n.Egress, n.Store), n.logger)
	return err
}

// startProvisioner makes the provisioner, the runner and the one-shot
// manager.
func (n *Node) startProvisioner(secrets *secretscan.Known) error {
	c := n.cfg
	snapshotDir := filepath.Join(c.StateDir, "snapshots")
	if c.NoSnapshots {
		snapshotDir = ""
	}
	var err error
	n.Provisioner, err = provision.New(provision.Config{
		Backends: n.Backends,
		Admission: provision.Admission{
			OneShot:            c.MaxConcurrent,
			OneShotTenantShare: c.TenantShare,
			MaxQueue:           c.MaxQueue,
			Sessions:           c.Sessions.Max,
		},
		Quotas:      n.Quotas,
		SnapshotDir: snapshotDir,
		MaxStarts:   c.MaxStarts,
		Pool: provision.PoolConfig{
			Min:          c.Pool.Min,
			Max:          c.Pool.Max,
			MemoryBudget: c.Pool.MemoryMiB << 20,
			MaxAge:       c.Pool.MaxAge,
			Disabled:     c.Pool.Max == 0,
		},
		Egress:      egressOf(n.Egress),
		Secrets:     secretscan.Default().WithKnown(secrets),
		Quarantines: n.Store,
		Metrics:     n.Registry,
		Logger:      n.logger,
	})
	if err != nil {
		return err
	}
	if n.Runner, err = run.New(run.Config{Store: n.Store, Metrics: n.Registry, Watchdog: watchdogOf(n.Abuse), Logger: n.logger}); err != nil {
		return err
	}
	n.OneShot, err = oneshot.New(oneshot.Config{
		Provisioner:  n.Provisioner,
		Runner:       n.Runner,
		Images:       n.Images,
		Store:        n.Store,
		Blobs:        n.Blobs,
		Limits:       c.limits(),
		MaxTimeout:   c.MaxTimeout,
		NetworkAllow: c.Egress.allowFor,
		Logger:       n.logger,
	})
	return err
}

// limits are a one-shot run's limits when its request names none.
func (c Config) limits() airlock.Limits {
	l := airlock.DefaultLimits
	l.Timeout = c.DefaultTimeout
	l.MemoryBytes = c.MemoryMiB << 20
	return l
}
