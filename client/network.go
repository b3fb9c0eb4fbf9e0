package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"

	"github.com/airlockhq/airlock"
)

// SetSessionNetwork replaces a live session's network policy: PUT
// /v1/sessions/{id}/network. Open connections the new policy denies are
// closed.
func (c *Client) SetSessionNetwork(ctx context.Context, id string, p airlock.NetworkPolicy) (*airlock.Session, error) {
	if err := needID("session", id); err != nil {
		return nil, err
	}
	var s airlock.Session
	if _, err := c.call(ctx, http.MethodPut, sessionPath(id, "network"), nil, p, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// SessionEgress returns a page of a session's egress audit log, newest
// first: GET /v1/sessions/{id}/egress. Only Limit, Before, Kind and
// Verdict of the filter are used.
func (c *Client) SessionEgress(ctx context.Context, id string, f airlock.EgressFilter) (*airlock.EgressPage, error) {
	if err := needID("session", id); err != nil {
		return nil, err
	}
	var p airlock.EgressPage
	if _, err := c.call(ctx, http.MethodGet, sessionPath(id, "egress"), egressQuery(f), nil, &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// ExecutionEgress returns a page of a one-shot run's egress audit log,
// newest first: GET /v1/executions/{id}/egress. Only Limit, Before, Kind
// and Verdict of the filter are used. A run without a network has an
// empty log; another tenant's run is not found.
func (c *Client) ExecutionEgress(ctx context.Context, id string, f airlock.EgressFilter) (*airlock.EgressPage, error) {
	if err := needID("execution", id); err != nil {
		return nil, err
	}
	var p airlock.EgressPage
	if _, err := c.call(ctx, http.MethodGet, "v1/executions/"+url.PathEscape(id)+"/egress", egressQuery(f), nil, &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// egressQuery is the query of GET .../egress for f.
func egressQuery(f airlock.EgressFilter) url.Values {
	q := url.Values{}
	if f.Limit > 0 {
		q.Set("limit", strconv.Itoa(f.Limit))
	}
	if f.Before > 0 {
		q.Set("before", strconv.FormatInt(f.Before, 10))
	}
	if f.Kind != "" {
		q.Set("kind", f.Kind)
	}
	if f.Verdict != "" {
		q.Set("verdict", f.Verdict)
	}
	return q
}
