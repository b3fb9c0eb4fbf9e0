package client

import (
	"context"
	"net/http"

	"github.com/airlockhq/airlock"
)

// Usage returns the tenant's use of each of its quotas (GET /v1/usage).
// A request refused by a quota is an *airlock.Error with code
// airlock.ERATELIMITED whose Extensions name the quota, its limit and
// the use ("quota", "limit", "used", "unit"), and whose RetryAfter says
// when to try again.
func (c *Client) Usage(ctx context.Context) (*airlock.Usage, error) {
	req, err := c.newRequest(ctx, http.MethodGet, c.endpoint("v1/usage", nil), nil)
	if err != nil {
		return nil, err
	}
	var u airlock.Usage
	if err := c.doJSON(req, &u); err != nil {
		return nil, err
	}
	return &u, nil
}
