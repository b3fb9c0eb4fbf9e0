package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/airlockhq/airlock"
)

// SessionOption adjusts one CreateSession call.
type SessionOption func(*sessionOptions)

type sessionOptions struct {
	idempotencyKey string
}

// WithIdempotencyKey sends the Idempotency-Key header: a retry with the
// same key and request gets the session the first call made instead of a
// second one (for 24 hours).
func WithIdempotencyKey(key string) SessionOption {
	return func(o *sessionOptions) { o.idempotencyKey = key }
}

// sessionPath is the API path of a session, or of something under it.
func sessionPath(id string, rest ...string) string {
	p := "v1/sessions/" + url.PathEscape(id)
	for _, r := range rest {
		p += "/" + r
	}
	return p
}

func needID(what, id string) error {
	if id == "" {
		return airlock.Errorf(airlock.EINVALID, "client: %s ID is required", what)
	}
	return nil
}

// jsonBody encodes v for a request body.
func jsonBody(v any) ([]byte, error) { return json.Marshal(v) }

// call sends a request with an optional JSON body and decodes a JSON
// answer into out (nil for none, e.g. 204).
func (c *Client) call(ctx context.Context, method, path string, query url.Values, in, out any) (*http.Response, error) {
	var body []byte
	if in != nil {
		b, err := jsonBody(in)
		if err != nil {
			return nil, err
		}
		body = b
	}
	req, err := c.newRequest(ctx, method, c.endpoint(path, query), body)
	if err != nil {
		return nil, err
	}
	return c.send(req, out)
}

// send sends req; a 2xx JSON object body is decoded into out (if not
// nil), other statuses are *Error. The response is returned with its body
// closed, for its status and headers.
func (c *Client) send(req *http.Request, out any) (*http.Response, error) {
	req.Header.Set("Accept", "application/json, application/problem+json")
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return resp, problemError(resp)
	}
	if out == nil {
		drain(resp.Body)
		return resp, nil
	}
	return resp, decodeObject(resp, req.Method+" "+req.URL.Path, out)
}

// decodeObject reads a bounded JSON object body into out.
func decodeObject(resp *http.Response, what string, out any) error {
	data, err := io.ReadAll(io.LimitReader(resp.Body, MaxJSONBytes+1))
	if err != nil {
		return fmt.Errorf("client: %s: reading response: %w", what, err)
	}
	if len(data) > MaxJSONBytes {
		return fmt.Errorf("client: %s: %w: body is larger than %d bytes", what, ErrBadResponse, MaxJSONBytes)
	}
	trimmed := bytes.TrimLeft(data, " \t\r\n")
	if len(trimmed) == 0 || trimmed[0] != '{' || json.Unmarshal(data, out) != nil {
		return fmt.Errorf("client: %s: %w: HTTP %d with a body that is not the expected JSON object (Content-Type %q, starts %q)",
			what, ErrBadResponse, resp.StatusCode, resp.Header.Get("Content-Type"), snippet(data, 64))
	}
	return nil
}

// CreateSession makes a session (POST /v1/sessions) and returns it once
// its sandbox is ready. created is false when an idempotency key made the
// server return the session an earlier call made.
func (c *Client) CreateSession(ctx context.Context, req airlock.CreateSessionRequest, opts ...SessionOption) (s *airlock.Session, created bool, err error) {
	var o sessionOptions
	for _, opt := range opts {
		opt(&o)
	}
	if o.idempotencyKey != "" && !airlock.ValidIdempotencyKey(o.idempotencyKey) {
		return nil, false, airlock.Errorf(airlock.EINVALID, "client: idempotency key must be 1 to %d printable ASCII characters without spaces", airlock.MaxIdempotencyKeyBytes)
	}
	body, err := jsonBody(req)
	if err != nil {
		return nil, false, err
	}
	hreq, err := c.newRequest(ctx, http.MethodPost, c.endpoint("v1/sessions", nil), body)
	if err != nil {
		return nil, false, err
	}
	if o.idempotencyKey != "" {
		hreq.Header.Set("Idempotency-Key", o.idempotencyKey)
	}
	var sess airlock.Session
	resp, err := c.send(hreq, &sess)
	if err != nil {
		return nil, false, err
	}
	return &sess, resp != nil && resp.StatusCode == http.StatusCreated, nil
}

// Session returns one of the tenant's sessions (GET /v1/sessions/{id}).
func (c *Client) Session(ctx context.Context, id string) (*airlock.Session, error) {
	if err := needID("session", id); err != nil {
		return nil, err
	}
	var s airlock.Session
	if _, err := c.call(ctx, http.MethodGet, sessionPath(id), nil, nil, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// ListSessionsOptions selects a page of sessions.
type ListSessionsOptions struct {
	Limit    int    // 0: the server's default
	Before   string // NextCursor of the previous page
	LiveOnly bool   // only sessions that have not ended
}

// ListSessions returns a page of the tenant's sessions, newest first
// (GET /v1/sessions).
func (c *Client) ListSessions(ctx context.Context, o ListSessionsOptions) (*airlock.SessionPage, error) {
	q := url.Values{}
	if o.Limit < 0 {
		return nil, airlock.Errorf(airlock.EINVALID, "client: limit must not be negative")
	}
	if o.Limit > 0 {
		q.Set("limit", strconv.Itoa(o.Limit))
	}
	if o.Before != "" {
		q.Set("before", o.Before)
	}
	if o.LiveOnly {
		q.Set("state", "live")
	}
	var p airlock.SessionPage
	if _, err := c.call(ctx, http.MethodGet, "v1/sessions", q, nil, &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// DeleteSession destroys a session and returns its final record
// (DELETE /v1/sessions/{id}).
func (c *Client) DeleteSession(ctx context.Context, id string) (*airlock.Session, error) {
	if err := needID("session", id); err != nil {
		return nil, err
	}
	var s airlock.Session
	if _, err := c.call(ctx, http.MethodDelete, sessionPath(id), nil, nil, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// ExtendSession sets a session to expire timeoutS seconds from now
// (POST /v1/sessions/{id}/timeout).
func (c *Client) ExtendSession(ctx context.Context, id string, timeoutS int) (*airlock.Session, error) {
	if err := needID("session", id); err != nil {
		return nil, err
	}
	var s airlock.Session
	if _, err := c.call(ctx, http.MethodPost, sessionPath(id, "timeout"), nil, map[string]int{"timeout_s": timeoutS}, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// isEventStream reports whether a response is text/event-stream.
func isEventStream(resp *http.Response) bool {
	return strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream")
}
