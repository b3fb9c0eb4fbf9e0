package node

import (
	"context"
	"path/filepath"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/secretscan"
	"github.com/airlockhq/airlock/internal/version"
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
	n.Registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), version.Collector())
	// The quotas' counters are written last on the way out, after every
	// sandbox has ended or been left for the next start.
	var err error
	if n.Quotas = n.parts.quotas; n.Quotas == nil {
		var stop func(context.Context) error
		if n.Quotas, stop, err = newQuotas(ctx, c.Quotas, c.Fleet, c.Sessions.MaxPerTenant, c.StateDir, n.Store, n.Registry, n.logger); err != nil {
			return err
		}
		n.onClose(n.closeWithin(30*time.Second, "writing the quotas' counters", stop))
	}
	secrets := hostSecrets(c.StateDir, c.API.MetricsKey)
	c.Blobs.addSecrets(secrets)
	n.secrets = secrets
	if n.Abuse, err = startAbuse(c.Abuse, n.Store, n.Registry, n.logger); err != nil {
		return err
	}
	if n.Abuse != nil {
		n.onClose(func() { n.Abuse.Close() })
	}
	if n.Egress, err = startEgress(c.Egress, c.StateDir, egressStoreOf(n.Abuse, n.Store), n.Store, n.Quotas, secrets, c.Fleet.infrastructure(c.Store.URL), n.logger); err != nil {
		return err
	}
	if n.Egress != nil { // closed after the sessions and the provisioner: their networks go first
		n.onClose(n.closeWithin(time.Minute, "stopping the egress proxy", n.Egress.Close))
	}
	n.egress, n.egressLog = egressOf(n.Egress), egressLogOf(n.Egress, n.Store)
	if n.parts.egress != nil {
		n.egress, n.egressLog = n.parts.egress, n.parts.egressLog
	}
	if err := n.startTemplates(ctx, secrets); err != nil {
		return err
	}
	if err := n.startProvisioner(secrets); err != nil {
		return err
	}
	keep, err := c.Keep.config(ctx, c.StateDir, !c.Fleet.enabled() && !c.Store.postgres(), n.Store, n.Blobs, n.logger)
	if err != nil {
		return err
	}
	if err := n.startWebhooks(keep); err != nil {
		return err
	}
	if n.Volumes, err = n.newVolumes(keep); err != nil {
		return err
	}
	n.Sessions, err = newSessions(c.Sessions, keep, n.Store, n.Provisioner, n.Runner, n.resolver(), n.Store, n.egress, n.egressLog, n.templateResolver(), n.Volumes, n.parts.session, n.logger)
	if err == nil && n.Templates != nil {
		// Deleting a template made from a session with its memory deletes
		// its memory snapshot.
		n.Templates.OnDeleteMemory(n.Sessions.DeleteSnapshot)
	}
	return err
}

// startProvisioner makes the provisioner, the runner and the one-shot
// manager.
func (n *Node) startProvisioner(secrets *secretscan.Known) error {
	c := n.cfg
	snapshotDir := c.SnapshotDir
	if snapshotDir == "" {
		snapshotDir = filepath.Join(c.StateDir, "snapshots")
	}
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
		Pool:        c.Pool,
		Egress:      n.egress,
		Secrets:     secretscan.Default().WithKnown(secrets),
		Quarantines: n.quarantines(),
		Metrics:     n.Registry,
		Logger:      n.logger,
	})
	if err != nil {
		return err
	}
	if n.Runner, err = run.New(run.Config{Store: n.Store, Metrics: n.Registry, Watchdog: n.watchdog(), Logger: n.logger}); err != nil {
		return err
	}
	n.OneShot, err = oneshot.New(oneshot.Config{
		Provisioner:  n.Provisioner,
		Runner:       n.Runner,
		Images:       n.resolver(),
		Templates:    n.templateResolver(),
		Store:        n.Store,
		Blobs:        n.Blobs,
		Limits:       c.limits(),
		MaxTimeout:   c.MaxTimeout,
		NetworkAllow: n.networkAllow(),
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

// quarantines is what admission asks whether a tenant is quarantined.
func (n *Node) quarantines() provision.Quarantines {
	if n.parts.quarantines != nil {
		return n.parts.quarantines
	}
	return n.Store
}

// watchdog is what the runner reports to.
func (n *Node) watchdog() airlock.Watchdog {
	if n.parts.watchdog != nil {
		return n.parts.watchdog
	}
	return watchdogOf(n.Abuse)
}

// networkAllow is the tenants' default allow list for one-shot runs.
func (n *Node) networkAllow() func(*airlock.Tenant) []string {
	if n.parts.networkAllow != nil {
		return n.parts.networkAllow
	}
	return n.cfg.Egress.allowFor
}
