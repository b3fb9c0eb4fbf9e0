package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"

	"github.com/airlockhq/airlock"
)

// Events feed and webhooks (docs/events.md).

// Events returns the tenant's session and abuse events after cursor,
// oldest first (GET /v1/events?cursor=): cursor "" reads from the oldest
// kept; pass the page's NextCursor back to read on (it is the cursor
// given when nothing is newer). limit 0 is the server's default (50).
func (c *Client) Events(ctx context.Context, cursor string, limit int) (*airlock.EventPage, error) {
	if limit < 0 {
		return nil, airlock.Errorf(airlock.EINVALID, "client: limit must not be negative")
	}
	q := url.Values{"cursor": {cursor}}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	var p airlock.EventPage
	if _, err := c.call(ctx, http.MethodGet, "v1/events", q, nil, &p); err != nil {
		return nil, err
	}
	return &p, nil
}

func webhookPath(id string) string { return "v1/webhooks/" + url.PathEscape(id) }

// CreateWebhook registers a URL for the tenant's events; the answer
// carries the signing secret, shown this once.
func (c *Client) CreateWebhook(ctx context.Context, req airlock.CreateWebhookRequest) (*airlock.Webhook, error) {
	var w airlock.Webhook
	if _, err := c.call(ctx, http.MethodPost, "v1/webhooks", nil, req, &w); err != nil {
		return nil, err
	}
	return &w, nil
}

// ListWebhooks returns the tenant's webhooks, oldest first, without
// their secrets.
func (c *Client) ListWebhooks(ctx context.Context) ([]*airlock.Webhook, error) {
	var p airlock.WebhookPage
	if _, err := c.call(ctx, http.MethodGet, "v1/webhooks", nil, nil, &p); err != nil {
		return nil, err
	}
	return p.Webhooks, nil
}

// DeleteWebhook removes a webhook and its pending deliveries.
func (c *Client) DeleteWebhook(ctx context.Context, id string) error {
	if err := needID("webhook", id); err != nil {
		return err
	}
	_, err := c.call(ctx, http.MethodDelete, webhookPath(id), nil, nil, nil)
	return err
}

// WebhookDeliveries returns a page of a webhook's delivery log, newest
// first; before is the previous page's NextCursor ("" for the first).
func (c *Client) WebhookDeliveries(ctx context.Context, id, before string, limit int) (*airlock.WebhookDeliveryPage, error) {
	if err := needID("webhook", id); err != nil {
		return nil, err
	}
	q := url.Values{}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	if before != "" {
		q.Set("before", before)
	}
	var p airlock.WebhookDeliveryPage
	if _, err := c.call(ctx, http.MethodGet, webhookPath(id)+"/deliveries", q, nil, &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// ReplayWebhookDelivery sends a delivery again now.
func (c *Client) ReplayWebhookDelivery(ctx context.Context, id, deliveryID string) (*airlock.WebhookDelivery, error) {
	if err := needID("webhook", id); err != nil {
		return nil, err
	}
	if err := needID("delivery", deliveryID); err != nil {
		return nil, err
	}
	var d airlock.WebhookDelivery
	if _, err := c.call(ctx, http.MethodPost, webhookPath(id)+"/deliveries/"+url.PathEscape(deliveryID)+"/replay", nil, nil, &d); err != nil {
		return nil, err
	}
	return &d, nil
}
