package client

import (
	"context"
	"net/http"
)

// HealthPath is the path, under the base URL, of the server's health check.
const HealthPath = "healthz"

// Health checks that the server is up (GET /healthz): nil on any 2xx.
func (c *Client) Health(ctx context.Context) error {
	req, err := c.newRequest(ctx, http.MethodGet, c.endpoint(HealthPath, nil), nil)
	if err != nil {
		return err
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return problemError(resp)
	}
	drain(resp.Body)
	return nil
}
