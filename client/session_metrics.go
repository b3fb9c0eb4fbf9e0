package client

import (
	"context"
	"net/http"
	"net/url"
	"time"

	"github.com/airlockhq/airlock"
)

// SessionMetrics returns the resource samples of a session, live or
// ended, oldest first: GET /v1/sessions/{id}/metrics. A zero start or end
// leaves that side open; both are inclusive.
func (c *Client) SessionMetrics(ctx context.Context, id string, start, end time.Time) (*airlock.SessionMetrics, error) {
	if err := needID("session", id); err != nil {
		return nil, err
	}
	q := url.Values{}
	if !start.IsZero() {
		q.Set("start", start.UTC().Format(time.RFC3339Nano))
	}
	if !end.IsZero() {
		q.Set("end", end.UTC().Format(time.RFC3339Nano))
	}
	var m airlock.SessionMetrics
	if _, err := c.call(ctx, http.MethodGet, sessionPath(id, "metrics"), q, nil, &m); err != nil {
		return nil, err
	}
	return &m, nil
}
