package client

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/airlockhq/airlock"
)

// ExecuteOption adjusts one Execute call.
type ExecuteOption func(*executeOptions)

type executeOptions struct {
	agentID string
}

// WithAgentID sends the X-Agent-Id header: which agent asked for the run,
// recorded with the execution.
func WithAgentID(id string) ExecuteOption {
	return func(o *executeOptions) { o.agentID = id }
}

// Execute runs code in a fresh sandbox (POST /v1/execute) and returns the
// result. A non-zero exit code, a timeout or an OOM kill is a result, not
// an error; an error is the service's refusal or failure.
func (c *Client) Execute(ctx context.Context, req airlock.ExecuteRequest, opts ...ExecuteOption) (*airlock.Execution, error) {
	var o executeOptions
	for _, opt := range opts {
		opt(&o)
	}
	if strings.ContainsFunc(o.agentID, func(r rune) bool { return r < ' ' || r == 0x7f }) {
		return nil, airlock.Errorf(airlock.EINVALID, "client: agent ID must not contain control characters")
	}
	body, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	hreq, err := c.newRequest(ctx, http.MethodPost, c.endpoint("v1/execute", nil), body)
	if err != nil {
		return nil, err
	}
	if o.agentID != "" {
		hreq.Header.Set("X-Agent-Id", o.agentID)
	}
	var e airlock.Execution
	if err := c.doJSON(hreq, &e); err != nil {
		return nil, err
	}
	return &e, nil
}
