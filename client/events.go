package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"

	"github.com/airlockhq/airlock"
)

// ListEvents returns a page of the tenant's abuse events, newest first
// (GET /v1/events). limit 0 means the server's default; before is the
// previous page's NextCursor.
func (c *Client) ListEvents(ctx context.Context, limit int, before string) (*airlock.AbuseEventPage, error) {
	if limit < 0 {
		return nil, airlock.Errorf(airlock.EINVALID, "client: limit must not be negative")
	}
	q := url.Values{}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	if before != "" {
		q.Set("before", before)
	}
	req, err := c.newRequest(ctx, http.MethodGet, c.endpoint("v1/events", q), nil)
	if err != nil {
		return nil, err
	}
	var p airlock.AbuseEventPage
	if err := c.doJSON(req, &p); err != nil {
		return nil, err
	}
	return &p, nil
}
