package provision

import (
	"fmt"
	"log/slog"
	"runtime"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/secretscan"
	"github.com/airlockhq/airlock/service/quota"
)

// Quotas are the tenants' quotas, as the provisioner uses them.
type Quotas interface {
	// Admit takes a sandbox's share of its tenant's quotas, or refuses
	// it with a 429 problem; the hold is released when the sandbox ends.
	Admit(tenantID string, c quota.Claim) (*quota.Hold, error)
	// Exec counts one session exec or cell, or refuses it.
	Exec(tenantID string) error
}

var _ Quotas = (*quota.Ledger)(nil)

// Config configures a Provisioner.
type Config struct {
	// Backends are the node's backends, its default first. Requests reach
	// the others by asking for their isolation, within the tenant's floor
	// (airlock.ChooseBackend). Base snapshots and the warm pool serve
	// every backend that can snapshot.
	Backends []airlock.Backend

	// Admission bounds what runs at once on the node.
	Admission Admission
	// Quotas are the tenants' quotas (a *quota.Ledger): every sandbox
	// takes its share of them before it takes the node's room, and
	// session execs and cells count against executions per minute. Nil
	// is a ledger in memory whose only limit is
	// Admission.SessionsPerTenant sessions per tenant.
	Quotas Quotas

	// SnapshotDir holds the base snapshots; empty disables them (every
	// sandbox that is not from the pool boots cold).
	SnapshotDir string
	// Recipes say how each image and language is readied ahead of a
	// request; default DefaultRecipes().
	Recipes map[string]map[airlock.Language]Recipe
	// Pool sizes the warm pool.
	Pool PoolConfig
	// MaxStarts bounds the sandboxes being made at once on the node
	// (restores and boots, for requests and pool fills alike); the number
	// of CPUs if zero. A request that misses the pool while all are busy
	// waits for the next pool member or a free start, whichever comes
	// first, instead of starting one more that would slow every other.
	MaxStarts int

	// Quarantines, when set, refuses every claim of a quarantined tenant
	// (403 tenant-quarantined): the abuse monitor's response.
	Quarantines Quarantines

	// Egress gives sandboxes that ask for a network their namespace; nil
	// refuses such requests (network-unavailable).
	Egress airlock.Egress

	// Secrets scans what a base snapshot would keep (the sandbox's
	// environment and the checkpoint's files) before the snapshot is
	// used; one that holds a credential is refused and its key boots
	// cold. Nil means secretscan.Default (the patterns, without the
	// host's own values).
	Secrets *secretscan.Scanner

	// Metrics registers the provisioner's Prometheus series; nil keeps
	// them in a private registry.
	Metrics prometheus.Registerer
	Logger  *slog.Logger
}

// Admission bounds the sandboxes of a node.
type Admission struct {
	// OneShot is how many one-shot runs may hold a sandbox at once (8);
	// more wait up to QueueTimeout (30 s) for a slot, then get a 503
	// node-busy problem.
	OneShot      int
	QueueTimeout time.Duration
	// MaxQueue bounds the one-shot runs waiting for a slot (4 times
	// OneShot); past it a request is refused at once with a 503 node-busy
	// problem and Retry-After, instead of waiting to time out.
	MaxQueue int
	// OneShotTenantShare is the share of the one-shot slots one tenant
	// may hold or wait for at once (0.75, at least one slot): a tenant
	// past it gets a 429 tenant-busy problem at once, so one tenant
	// cannot take a whole node from the others.
	OneShotTenantShare float64
	// Sessions bounds live sessions on the node (32; more are a 503).
	Sessions int
	// SessionsPerTenant bounds those of one tenant (8; more are a 429
	// session-quota problem) when Config.Quotas is nil; with Quotas, the
	// sessions quota does.
	SessionsPerTenant int
}

func (a *Admission) defaults() error {
	if a.OneShot <= 0 {
		a.OneShot = 8
	}
	if a.QueueTimeout <= 0 {
		a.QueueTimeout = 30 * time.Second
	}
	if a.MaxQueue <= 0 {
		a.MaxQueue = 4 * a.OneShot
	}
	if a.OneShotTenantShare == 0 {
		a.OneShotTenantShare = 0.75
	}
	if a.OneShotTenantShare < 0 || a.OneShotTenantShare > 1 {
		return fmt.Errorf("provision: the one-shot tenant share must be in (0, 1]")
	}
	if a.Sessions <= 0 {
		a.Sessions = 32
	}
	if a.SessionsPerTenant <= 0 {
		a.SessionsPerTenant = 8
	}
	return nil
}

// tenantSlots is how many one-shot slots one tenant may hold.
func (a *Admission) tenantSlots() int {
	n := int(float64(a.OneShot)*a.OneShotTenantShare + 0.999999)
	return max(n, 1)
}

// Validate fills defaults and checks the config.
func (c *Config) Validate() error {
	if len(c.Backends) == 0 {
		return fmt.Errorf("provision: at least one backend is required")
	}
	names := map[string]bool{}
	for i, b := range c.Backends {
		if b == nil {
			return fmt.Errorf("provision: backend %d is nil", i)
		}
		if names[b.Name()] {
			return fmt.Errorf("provision: two backends are named %q", b.Name())
		}
		names[b.Name()] = true
	}
	if err := c.Admission.defaults(); err != nil {
		return err
	}
	if c.Quotas == nil {
		l, err := quota.New(quota.Config{Defaults: quota.Limits{quota.Sessions: int64(c.Admission.SessionsPerTenant)}, Logger: c.Logger})
		if err != nil {
			return err
		}
		c.Quotas = l
	}
	if c.Recipes == nil {
		c.Recipes = DefaultRecipes()
	}
	c.Pool.defaults()
	if c.MaxStarts <= 0 {
		c.MaxStarts = runtime.NumCPU()
	}
	if c.Metrics == nil {
		c.Metrics = prometheus.NewRegistry()
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Secrets == nil {
		c.Secrets = secretscan.Default()
	}
	return nil
}
