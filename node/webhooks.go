package node

import (
	"fmt"
	"os"
	"time"

	"github.com/airlockhq/airlock/service/session"
	"github.com/airlockhq/airlock/service/webhook"
)

// WebhookConfig configures the delivery of tenants' events to their
// webhooks.
type WebhookConfig struct {
	// AllowPrivate lets deliveries reach private, loopback and
	// link-local addresses (never the metadata address).
	AllowPrivate bool
	// MaxPerTenant is how many webhooks one tenant may register.
	MaxPerTenant int
	// RetrySchedule is the wait after each failed try, the last
	// repeating (webhook.DefaultSchedule when empty); Horizon is how long
	// a delivery is tried.
	RetrySchedule []time.Duration
	Horizon       time.Duration
	// Interval is how often the delivery queue is polled (1 s if zero).
	Interval time.Duration
	// EventsRetention is how long events and webhook deliveries are
	// kept (--events-retention).
	EventsRetention time.Duration
}

// startWebhooks starts the webhook service when the node can seal their
// secrets (it has a master key); without one /v1/webhooks answers 501.
func (n *Node) startWebhooks(keep session.KeepConfig) error {
	c := n.cfg.Webhooks
	if c.EventsRetention <= 0 {
		return fmt.Errorf("--events-retention must be positive")
	}
	pruner := startEventPruner(n.Store, c.EventsRetention, nil, n.logger.With("service", "events"))
	n.onClose(pruner.close)
	if keep.Keys == nil {
		n.logger.Info("no master key: webhooks are off")
		return nil
	}
	if c.MaxPerTenant <= 0 {
		return fmt.Errorf("--webhook-max-per-tenant must be positive")
	}
	node := n.cfg.Fleet.NodeID
	if node == "" {
		node, _ = os.Hostname()
	}
	svc, err := webhook.New(webhook.Config{
		Store:        n.Store,
		Keys:         keep.Keys,
		MaxPerTenant: c.MaxPerTenant,
		AllowPrivate: c.AllowPrivate,
		Schedule:     c.RetrySchedule,
		Horizon:      c.Horizon,
		Interval:     c.Interval,
		Node:         node,
		Logger:       n.logger.With("service", "webhook"),
	})
	if err != nil {
		return err
	}
	svc.Start()
	n.Webhooks = svc
	n.onClose(func() { svc.Close() })
	return nil
}
