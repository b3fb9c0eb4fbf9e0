package webhook

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/seal"
)

// Service registers webhooks and delivers their events. It is safe for
// concurrent use.
type Service struct {
	cfg    Config
	client *http.Client

	stop     chan struct{}
	stopOnce sync.Once
	wg       sync.WaitGroup
	kick     chan struct{}
}

var _ airlock.WebhookService = (*Service)(nil)

// New returns a service; Start starts its dispatcher.
func New(cfg Config) (*Service, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	d := &dialer{resolver: cfg.Resolver, allowPrivate: cfg.AllowPrivate, timeout: cfg.Timeout}
	tr := &http.Transport{
		Proxy:                 nil, // never the environment's proxy: the dialer's check is the rule
		DialContext:           d.DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConnsPerHost:   2,
		IdleConnTimeout:       30 * time.Second,
		TLSHandshakeTimeout:   cfg.Timeout,
		ResponseHeaderTimeout: cfg.Timeout,
	}
	return &Service{
		cfg: cfg,
		client: &http.Client{Transport: tr, Timeout: cfg.Timeout,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }},
		stop: make(chan struct{}),
		kick: make(chan struct{}, 1),
	}, nil
}

func secretAAD(tenantID, id string) []byte {
	return []byte("airlock-webhook-secret-v1\x00" + tenantID + "\x00" + id)
}

func (s *Service) sealSecret(ctx context.Context, tenantID, id string, secret []byte) (keyID string, sealed []byte, err error) {
	keyID, dek, err := s.cfg.Keys.DataKey(ctx, tenantID)
	if err != nil {
		return "", nil, err
	}
	var buf bytes.Buffer
	w, err := seal.NewWriter(&buf, dek, keyID, secretAAD(tenantID, id))
	if err != nil {
		return "", nil, err
	}
	if _, err := w.Write(secret); err != nil {
		return "", nil, err
	}
	if err := w.Close(); err != nil {
		return "", nil, err
	}
	return keyID, buf.Bytes(), nil
}

func (s *Service) openSecret(ctx context.Context, w *airlock.Webhook) ([]byte, error) {
	r, err := seal.NewReader(bytes.NewReader(w.SealedSecret), func(keyID string) ([]byte, error) {
		return s.cfg.Keys.DataKeyByID(ctx, w.TenantID, keyID)
	}, secretAAD(w.TenantID, w.ID))
	if err != nil {
		return nil, err
	}
	return io.ReadAll(io.LimitReader(r, 1024))
}

// CreateWebhook registers a webhook of the tenant and answers it with
// its signing secret, which is never shown again.
func (s *Service) CreateWebhook(ctx context.Context, tenant *airlock.Tenant, req airlock.CreateWebhookRequest) (*airlock.Webhook, error) {
	if err := req.Validate(); err != nil {
		return nil, err
	}
	n, err := s.cfg.Store.CountWebhooks(ctx, tenant.ID)
	if err != nil {
		return nil, err
	}
	if n >= s.cfg.MaxPerTenant {
		return nil, airlock.Problem(airlock.ECONFLICT, "webhook-limit", "the tenant has %d webhooks, the most this node allows; delete one (DELETE /v1/webhooks/{id}) first", n)
	}
	raw := make([]byte, 32)
	rand.Read(raw)
	secret := "whsec_" + hex.EncodeToString(raw)
	w := &airlock.Webhook{ID: airlock.NewID(), TenantID: tenant.ID, URL: req.URL, Events: dedupe(req.Events), CreatedAt: s.cfg.Now().UTC()}
	w.KeyID, w.SealedSecret, err = s.sealSecret(ctx, tenant.ID, w.ID, []byte(secret))
	if err != nil {
		return nil, err
	}
	if err := s.cfg.Store.CreateWebhook(ctx, w); err != nil {
		return nil, err
	}
	out := *w
	out.Secret = secret
	return &out, nil
}

func dedupe(types []string) []string {
	out := []string{}
	seen := map[string]bool{}
	for _, t := range types {
		if !seen[t] {
			seen[t] = true
			out = append(out, t)
		}
	}
	return out
}

// ListWebhooks lists the tenant's webhooks, oldest first, without secrets.
func (s *Service) ListWebhooks(ctx context.Context, tenant *airlock.Tenant) (*airlock.WebhookPage, error) {
	list, err := s.cfg.Store.ListWebhooks(ctx, tenant.ID)
	if err != nil {
		return nil, err
	}
	return &airlock.WebhookPage{Webhooks: list}, nil
}

// DeleteWebhook removes the tenant's webhook; its pending deliveries
// are dropped.
func (s *Service) DeleteWebhook(ctx context.Context, tenant *airlock.Tenant, id string) error {
	return s.cfg.Store.DeleteWebhook(ctx, tenant.ID, id)
}

// ListDeliveries pages through the webhook's delivery log, newest first.
func (s *Service) ListDeliveries(ctx context.Context, tenant *airlock.Tenant, webhookID, before string, limit int) (*airlock.WebhookDeliveryPage, error) {
	if limit <= 0 {
		limit = 50
	}
	list, err := s.cfg.Store.ListDeliveries(ctx, tenant.ID, webhookID, before, limit)
	if err != nil {
		return nil, err
	}
	page := &airlock.WebhookDeliveryPage{Deliveries: list}
	if len(list) == limit {
		page.NextCursor = list[len(list)-1].ID
	}
	return page, nil
}

// ReplayDelivery sends one of the webhook's deliveries again, whatever
// its state: it is queued due now, under a new signature time.
func (s *Service) ReplayDelivery(ctx context.Context, tenant *airlock.Tenant, webhookID, deliveryID string) (*airlock.WebhookDelivery, error) {
	d, err := s.cfg.Store.ReplayDelivery(ctx, tenant.ID, webhookID, deliveryID, s.cfg.Now().UTC())
	if err != nil {
		return nil, err
	}
	s.Kick()
	return d, nil
}

// Kick makes the dispatcher look at the queue now.
func (s *Service) Kick() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}
