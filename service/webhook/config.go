package webhook

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/airlockhq/airlock"
)

// DataKeys seals and opens the webhooks' secrets under the tenant's data
// key (seal.Keys).
type DataKeys interface {
	DataKey(ctx context.Context, tenantID string) (id string, key []byte, err error)
	DataKeyByID(ctx context.Context, tenantID, id string) ([]byte, error)
}

// DefaultSchedule is the back-off between tries: a delivery is tried
// until it is Horizon old (a day), the last wait repeating.
var DefaultSchedule = []time.Duration{
	10 * time.Second, 30 * time.Second, time.Minute, 5 * time.Minute, 15 * time.Minute,
	30 * time.Minute, time.Hour, 2 * time.Hour, 4 * time.Hour,
}

// Config configures a Service.
type Config struct {
	Store airlock.WebhookStore
	Keys  DataKeys
	// MaxPerTenant is how many webhooks one tenant may have (10).
	MaxPerTenant int
	// AllowPrivate lets deliveries go to private, loopback and
	// link-local addresses (never the metadata address).
	AllowPrivate bool
	// Schedule is the wait after each failed try (DefaultSchedule); the
	// last repeats. Horizon is how long a delivery is tried (24 hours).
	Schedule []time.Duration
	Horizon  time.Duration
	// Timeout bounds one try (10 s); Interval is how often the queue is
	// polled (1 s); Lease how long a claimed delivery is held (a minute,
	// more than Timeout).
	Timeout  time.Duration
	Interval time.Duration
	Lease    time.Duration
	// Workers is how many deliveries go out at once (4).
	Workers int
	// Node names this node in the leases it takes.
	Node     string
	Resolver Resolver // net.DefaultResolver if nil
	Logger   *slog.Logger
	Now      func() time.Time
}

// Validate fills defaults and checks the config.
func (c *Config) Validate() error {
	if c.Store == nil || c.Keys == nil {
		return fmt.Errorf("webhook: a store and data keys are required")
	}
	if c.MaxPerTenant == 0 {
		c.MaxPerTenant = 10
	}
	if len(c.Schedule) == 0 {
		c.Schedule = DefaultSchedule
	}
	for _, d := range c.Schedule {
		if d <= 0 {
			return fmt.Errorf("webhook: retry waits must be positive")
		}
	}
	for _, d := range []struct {
		p   *time.Duration
		def time.Duration
	}{{&c.Horizon, 24 * time.Hour}, {&c.Timeout, 10 * time.Second}, {&c.Interval, time.Second}, {&c.Lease, time.Minute}} {
		if *d.p < 0 {
			return fmt.Errorf("webhook: durations must not be negative")
		}
		if *d.p == 0 {
			*d.p = d.def
		}
	}
	if c.Lease <= c.Timeout {
		return fmt.Errorf("webhook: the lease (%s) must be longer than a try's timeout (%s)", c.Lease, c.Timeout)
	}
	if c.MaxPerTenant < 0 {
		return fmt.Errorf("webhook: MaxPerTenant must not be negative")
	}
	if c.Workers <= 0 {
		c.Workers = 4
	}
	if c.Resolver == nil {
		c.Resolver = net.DefaultResolver
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Node == "" {
		c.Node = "local"
	}
	return nil
}
