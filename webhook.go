package airlock

import (
	"context"
	"net/url"
	"strings"
	"time"
)

// Webhooks: URLs a tenant registers to receive its events, each signed
// with a secret of its own (shown once), delivered from a queue kept in
// the store and retried with back-off.

// Webhook is one of a tenant's registered URLs.
type Webhook struct {
	ID       string   `json:"webhook_id"`
	TenantID string   `json:"tenant_id"`
	URL      string   `json:"url"`
	Events   []string `json:"events"` // the types it takes; empty: every type
	// Secret is the signing secret, set only in the answer to its
	// creation.
	Secret    string    `json:"secret,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	// SealedSecret is the secret sealed under the tenant's data key
	// (KeyID); never shown.
	SealedSecret []byte `json:"-"`
	KeyID        string `json:"-"`
}

// Takes reports whether the webhook takes events of type t.
func (w *Webhook) Takes(t string) bool {
	if len(w.Events) == 0 {
		return true
	}
	for _, e := range w.Events {
		if e == t {
			return true
		}
	}
	return false
}

// CreateWebhookRequest is the body of POST /v1/webhooks.
type CreateWebhookRequest struct {
	URL    string   `json:"url"`
	Events []string `json:"events,omitempty"`
}

// MaxWebhookURLBytes bounds a webhook's URL.
const MaxWebhookURLBytes = 2048

// Validate checks the URL (absolute http or https, no user info, no
// fragment) and the event types. Where the URL points is checked when
// it is delivered to, against the node's egress rules.
func (r *CreateWebhookRequest) Validate() error {
	if r.URL == "" || len(r.URL) > MaxWebhookURLBytes {
		return Problem(EINVALID, "invalid-webhook", "url is required, at most %d bytes", MaxWebhookURLBytes)
	}
	u, err := url.Parse(r.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Hostname() == "" {
		return Problem(EINVALID, "invalid-webhook", "url must be an absolute http or https URL")
	}
	if u.User != nil || u.Fragment != "" || strings.ContainsAny(r.URL, " \t\r\n") {
		return Problem(EINVALID, "invalid-webhook", "url must have no user info, fragment or white space")
	}
	if len(r.Events) > len(EventTypes) {
		return Problem(EINVALID, "invalid-webhook", "events lists at most %d types", len(EventTypes))
	}
	for _, t := range r.Events {
		if !ValidEventType(t) {
			return Problem(EINVALID, "invalid-webhook", "unknown event type %q (one of %s)", clip(t, 60), strings.Join(EventTypes, ", "))
		}
	}
	return nil
}

// Delivery states.
const (
	DeliveryPending   = "pending"   // waiting for its next try
	DeliveryDelivered = "delivered" // the receiver answered 2xx
	DeliveryFailed    = "failed"    // given up: retries ran out, or the URL is refused
)

// WebhookDelivery is the sending of one event to one webhook.
type WebhookDelivery struct {
	ID          string     `json:"delivery_id"`
	WebhookID   string     `json:"webhook_id"`
	TenantID    string     `json:"-"`
	EventID     string     `json:"event_id"`
	EventType   string     `json:"event_type"`
	State       string     `json:"state"`
	Attempts    int        `json:"attempts"`
	LastStatus  int        `json:"last_status,omitempty"` // the receiver's last HTTP status
	LastError   string     `json:"last_error,omitempty"`
	CreatedAt   time.Time  `json:"created_at"`
	NextAt      *time.Time `json:"next_attempt_at,omitempty"`
	DeliveredAt *time.Time `json:"delivered_at,omitempty"`
}

// WebhookDeliveryPage is one page of a webhook's deliveries, newest first.
type WebhookDeliveryPage struct {
	Deliveries []*WebhookDelivery `json:"deliveries"`
	NextCursor string             `json:"next_cursor,omitempty"`
}

// WebhookPage lists a tenant's webhooks, oldest first.
type WebhookPage struct {
	Webhooks []*Webhook `json:"webhooks"`
}

// DeliveryAttempt is the outcome of one try, for the store.
type DeliveryAttempt struct {
	DeliveryID string
	Status     int
	Error      string
	State      string     // the delivery's state after the try
	NextAt     *time.Time // pending: when to try again
	At         time.Time
}

// WebhookStore keeps webhooks and their delivery queue. Tenant-scoped
// calls treat another tenant's webhook as missing.
type WebhookStore interface {
	CreateWebhook(ctx context.Context, w *Webhook) error
	Webhook(ctx context.Context, tenantID, id string) (*Webhook, error)
	ListWebhooks(ctx context.Context, tenantID string) ([]*Webhook, error)
	CountWebhooks(ctx context.Context, tenantID string) (int, error)
	// DeleteWebhook removes the webhook and its deliveries.
	DeleteWebhook(ctx context.Context, tenantID, id string) error
	// ListDeliveries returns up to limit of the webhook's deliveries,
	// newest first, before the delivery before ("" for the first page).
	ListDeliveries(ctx context.Context, tenantID, webhookID, before string, limit int) ([]*WebhookDelivery, error)
	// ReplayDelivery queues one of the webhook's deliveries again, now.
	ReplayDelivery(ctx context.Context, tenantID, webhookID, deliveryID string, now time.Time) (*WebhookDelivery, error)
	// ClaimDeliveries leases up to limit pending deliveries due by now
	// to node until now+lease: one node of a fleet holds each.
	ClaimDeliveries(ctx context.Context, node string, now time.Time, lease time.Duration, limit int) ([]*WebhookDelivery, error)
	// FinishAttempt records one try of a claimed delivery and lets go
	// of its lease.
	FinishAttempt(ctx context.Context, a DeliveryAttempt) error
	// Event returns an event by ID (to build a delivery's body).
	Event(ctx context.Context, id string) (*Event, error)
}

// WebhookService is what the API offers for webhooks.
type WebhookService interface {
	CreateWebhook(ctx context.Context, tenant *Tenant, req CreateWebhookRequest) (*Webhook, error)
	ListWebhooks(ctx context.Context, tenant *Tenant) (*WebhookPage, error)
	DeleteWebhook(ctx context.Context, tenant *Tenant, id string) error
	ListDeliveries(ctx context.Context, tenant *Tenant, webhookID, before string, limit int) (*WebhookDeliveryPage, error)
	ReplayDelivery(ctx context.Context, tenant *Tenant, webhookID, deliveryID string) (*WebhookDelivery, error)
}
