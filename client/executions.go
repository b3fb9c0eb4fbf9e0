package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"

	"github.com/airlockhq/airlock"
)

// Execution returns one execution of the key's tenant
// (GET /v1/executions/{id}).
func (c *Client) Execution(ctx context.Context, id string) (*airlock.Execution, error) {
	if id == "" {
		return nil, airlock.Errorf(airlock.EINVALID, "client: execution ID is required")
	}
	req, err := c.newRequest(ctx, http.MethodGet, c.endpoint("v1/executions/"+url.PathEscape(id), nil), nil)
	if err != nil {
		return nil, err
	}
	var e airlock.Execution
	if err := c.doJSON(req, &e); err != nil {
		return nil, err
	}
	return &e, nil
}

// ListExecutions returns a page of the tenant's executions, newest first
// (GET /v1/executions). limit 0 means the server's default; before is the
// NextCursor of the previous page, or "" for the first.
func (c *Client) ListExecutions(ctx context.Context, limit int, before string) (*airlock.ExecutionPage, error) {
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
	req, err := c.newRequest(ctx, http.MethodGet, c.endpoint("v1/executions", q), nil)
	if err != nil {
		return nil, err
	}
	var p airlock.ExecutionPage
	if err := c.doJSON(req, &p); err != nil {
		return nil, err
	}
	return &p, nil
}
