package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/problem"
)

// Response size limits. JSON bodies are read into memory whole, so they are
// bounded; artifact downloads are streamed and bounded by their metadata.
const (
	MaxJSONBytes    = 64 << 20
	MaxProblemBytes = 64 << 10
)

// DefaultUserAgent is sent when Config.UserAgent is empty.
const DefaultUserAgent = "airlock-client/1"

// ErrBadResponse is wrapped by errors about a response the client cannot
// use: a 2xx whose body is not the JSON document expected, is too large, or
// an artifact whose bytes do not match its size or checksum.
var ErrBadResponse = errors.New("bad response from server")

// Config configures New.
type Config struct {
	// BaseURL is the server's root, e.g. "http://127.0.0.1:8080". It may
	// have a path prefix ("https://host/airlock"); API paths are appended.
	BaseURL string
	// APIKey is sent as "Authorization: Bearer <APIKey>" to BaseURL's host
	// only. Empty sends no Authorization header.
	APIKey string
	// HTTPClient makes the requests. If nil, a client without an overall
	// timeout (use ctx) that drops the key on redirects to another host or
	// from https to http is used.
	HTTPClient *http.Client
	// UserAgent is the User-Agent header; DefaultUserAgent if empty.
	UserAgent string
}

// Validate reports whether c can be used to make a Client.
func (c Config) Validate() error {
	if c.BaseURL == "" {
		return airlock.Errorf(airlock.EINVALID, "client: base URL is required")
	}
	u, err := url.Parse(c.BaseURL)
	if err != nil {
		return airlock.Errorf(airlock.EINVALID, "client: base URL %q does not parse: %v", c.BaseURL, err)
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return airlock.Errorf(airlock.EINVALID, "client: base URL %q must be http or https", c.BaseURL)
	case u.Host == "":
		return airlock.Errorf(airlock.EINVALID, "client: base URL %q has no host", c.BaseURL)
	case u.User != nil:
		return airlock.Errorf(airlock.EINVALID, "client: base URL must not carry credentials; use the API key")
	case u.RawQuery != "" || u.Fragment != "":
		return airlock.Errorf(airlock.EINVALID, "client: base URL %q must not have a query or fragment", c.BaseURL)
	case strings.ContainsFunc(c.APIKey, func(r rune) bool { return r <= ' ' || r == 0x7f }):
		return airlock.Errorf(airlock.EINVALID, "client: API key must not contain spaces or control characters")
	case strings.ContainsAny(c.UserAgent, "\r\n"):
		return airlock.Errorf(airlock.EINVALID, "client: user agent must be one line")
	}
	return nil
}

// Client talks to one Airlock server. It is safe for concurrent use.
type Client struct {
	base *url.URL // path always ends in "/"
	key  string
	hc   *http.Client
	ua   string
}

// New returns a Client for cfg.
func New(cfg Config) (*Client, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	base, _ := url.Parse(cfg.BaseURL) // checked by Validate
	if !strings.HasSuffix(base.Path, "/") {
		base.Path += "/"
		base.RawPath = ""
	}
	c := &Client{base: base, key: cfg.APIKey, hc: cfg.HTTPClient, ua: cfg.UserAgent}
	if c.hc == nil {
		c.hc = &http.Client{CheckRedirect: dropKeyOnRedirect}
	}
	if c.ua == "" {
		c.ua = DefaultUserAgent
	}
	return c, nil
}

// dropKeyOnRedirect keeps the bearer key from following a redirect to
// another host (net/http would keep it for subdomains) or to plain http.
func dropKeyOnRedirect(req *http.Request, via []*http.Request) error {
	if len(via) >= 10 {
		return errors.New("stopped after 10 redirects")
	}
	first := via[0].URL
	if !strings.EqualFold(req.URL.Host, first.Host) || (first.Scheme == "https" && req.URL.Scheme != "https") {
		req.Header.Del("Authorization")
	}
	return nil
}

// endpoint returns the absolute URL of an API path such as "v1/execute".
func (c *Client) endpoint(path string, query url.Values) *url.URL {
	u := *c.base
	u.Path += path
	u.RawPath = ""
	if len(query) > 0 {
		u.RawQuery = query.Encode()
	}
	return &u
}

// sameOrigin reports whether u may receive the API key: same scheme and
// host (with port) as the base URL.
func (c *Client) sameOrigin(u *url.URL) bool {
	return u.Scheme == c.base.Scheme && strings.EqualFold(u.Host, c.base.Host)
}

// newRequest builds a request; the key is attached only for the base URL's
// origin.
func (c *Client) newRequest(ctx context.Context, method string, u *url.URL, body []byte) (*http.Request, error) {
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), r)
	if err != nil {
		return nil, err
	}
	req.Header.Set("User-Agent", c.ua)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.key != "" && c.sameOrigin(u) {
		req.Header.Set("Authorization", "Bearer "+c.key)
	}
	return req, nil
}

// doJSON sends a request and decodes a 2xx JSON object body into out.
// Other statuses become *Error.
func (c *Client) doJSON(req *http.Request, out any) error {
	req.Header.Set("Accept", "application/json, application/problem+json")
	resp, err := c.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return problemError(resp)
	}
	what := req.Method + " " + req.URL.Path
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

// drain reads a little of a body we do not need so the connection can be
// reused.
func drain(r io.Reader) { io.Copy(io.Discard, io.LimitReader(r, MaxProblemBytes)) }

// isJSONType reports whether a Content-Type is JSON (problem or plain).
func isJSONType(ct string) bool { return problem.IsJSON(ct) }

// snippet returns at most n bytes of b as a printable string.
func snippet(b []byte, n int) string {
	if len(b) > n {
		b = b[:n]
	}
	return printable(string(b))
}

// printable replaces control characters and invalid UTF-8, so a server's
// text cannot drive a terminal.
func printable(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '\t' {
			return ' '
		}
		if r < ' ' || r == 0x7f || (r >= 0x80 && r < 0xa0) || r == '\uFFFD' {
			return '?'
		}
		return r
	}, strings.ToValidUTF8(s, "\uFFFD"))
}
