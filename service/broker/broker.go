package broker

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/problem"
)

// Broker makes calls for sandbox code with credentials that stay on the
// host. It implements airlock.Broker.
type Broker struct {
	cfg    Config
	scopes map[string]*Scope
	client map[string]*http.Client // by scope
}

var _ airlock.Broker = (*Broker)(nil)

// New returns a broker for the configured scopes.
func New(cfg Config) (*Broker, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	b := &Broker{cfg: cfg, scopes: map[string]*Scope{}, client: map[string]*http.Client{}}
	for i := range cfg.Scopes {
		sc := &cfg.Scopes[i]
		b.scopes[sc.Name] = sc
		b.client[sc.Name] = b.newClient(sc)
	}
	return b, nil
}

// Scopes lists the configured scope names.
func (b *Broker) Scopes() []string {
	out := make([]string, 0, len(b.scopes))
	for n := range b.scopes {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// Credentials returns the current value of every scope's credential by
// scope name (a file is read now; one that cannot be read is left out).
// They are for the secret scans of images and base snapshots: these
// values must never appear in anything a sandbox is given.
func (b *Broker) Credentials() map[string]string {
	out := map[string]string{}
	for name, sc := range b.scopes {
		if v, err := sc.credential(); err == nil {
			out[name] = v
		}
	}
	return out
}

// Granted checks that the tenant holds the scope: listed in the scope's
// Tenants (by ID or name) or granted in the store. It reads the store at
// every call. nil, a 403 problem broker-scope-not-granted, an EINVALID
// one for an unknown scope, or the store's error.
func (b *Broker) Granted(ctx context.Context, tenantID, scope string) error {
	sc := b.scopes[scope]
	if sc == nil {
		return airlock.Problem(airlock.EINVALID, "unknown-broker-scope", "the credential broker of this node has no scope %q", scope)
	}
	if tenantID == "" {
		return notGranted(scope)
	}
	if slices.Contains(sc.Tenants, tenantID) {
		return nil
	}
	if b.cfg.Grants == nil {
		return notGranted(scope)
	}
	grants, err := b.cfg.Grants.BrokerGrants(ctx, tenantID)
	if err != nil {
		return err
	}
	if slices.Contains(grants, scope) {
		return nil
	}
	if len(sc.Tenants) > 0 {
		t, err := b.cfg.Grants.TenantByID(ctx, tenantID)
		if airlock.ErrorCode(err) == airlock.ENOTFOUND {
			return notGranted(scope)
		} else if err != nil {
			return err
		}
		if slices.Contains(sc.Tenants, t.Name) {
			return nil
		}
	}
	return notGranted(scope)
}

func notGranted(scope string) error {
	return airlock.Problem(airlock.EFORBIDDEN, airlock.ProblemBrokerScopeNotGranted,
		"the tenant was not granted broker scope %q (the operator grants it: airlock admin tenant set NAME --broker-scope %s)", clip(scope), clip(scope))
}

// HasScope reports whether a scope of that name is configured.
func (b *Broker) HasScope(name string) bool { _, ok := b.scopes[name]; return ok }

func (b *Broker) newClient(sc *Scope) *http.Client {
	roots := sc.roots
	if roots == nil {
		roots = b.cfg.RootCAs
	}
	d := &net.Dialer{Timeout: 10 * time.Second}
	tr := &http.Transport{
		TLSClientConfig:       &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12},
		ForceAttemptHTTP2:     true,
		MaxIdleConnsPerHost:   8,
		IdleConnTimeout:       60 * time.Second,
		ResponseHeaderTimeout: b.cfg.Timeout,
		Proxy:                 nil, // never through a proxy from the environment
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			host, port, err := net.SplitHostPort(addr)
			if err != nil {
				return nil, err
			}
			if a, err := netip.ParseAddr(host); err == nil {
				return d.DialContext(ctx, network, netip.AddrPortFrom(a, mustPort(port)).String())
			}
			if b.cfg.LookupHost == nil {
				return d.DialContext(ctx, network, addr)
			}
			addrs, err := b.cfg.LookupHost(ctx, host)
			if err != nil {
				return nil, err
			}
			var errs []error
			for _, a := range addrs {
				c, err := d.DialContext(ctx, network, netip.AddrPortFrom(a, mustPort(port)).String())
				if err == nil {
					return c, nil
				}
				errs = append(errs, err)
			}
			return nil, fmt.Errorf("connect to %s: %w", host, errors.Join(errs...))
		},
	}
	return &http.Client{
		Transport: tr,
		Timeout:   b.cfg.Timeout,
		// A redirect elsewhere must not carry the credential: the sandbox
		// gets the redirect itself.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

func mustPort(s string) uint16 {
	p, _ := strconv.Atoi(s)
	return uint16(p)
}

// Headers never passed from the sandbox to the upstream: the credential is
// the broker's to set, cookies and proxy headers are not the sandbox's to
// send, hop-by-hop headers are per connection, and encodings and ranges
// would hide the credential from the response's redaction.
var dropRequest = []string{
	"Authorization", "Proxy-Authorization", "Cookie", "Cookie2", "Host",
	"Connection", "Keep-Alive", "Proxy-Connection", "Te", "Trailer", "Transfer-Encoding", "Upgrade",
	"Accept-Encoding", "Range", "If-Range", "Forwarded", "X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto", "X-Real-Ip",
}

// Headers never passed from the upstream to the sandbox.
var dropResponse = []string{
	"Set-Cookie", "Set-Cookie2", "Authorization", "Proxy-Authorization", "Proxy-Authenticate",
	"Connection", "Keep-Alive", "Proxy-Connection", "Te", "Trailer", "Transfer-Encoding", "Upgrade",
	"Content-Length", // the body may change by redaction
}

// Call handles one call from a sandbox: /<scope>/<path>.
func (b *Broker) Call(ctx context.Context, r *airlock.BrokerCall, w airlock.BrokerReply) {
	c := b.newCall(r, w)
	sc, rest, ok := c.authorize(ctx)
	if !ok {
		return
	}
	secret, err := sc.credential()
	if err != nil {
		b.cfg.Logger.Error("broker credential unavailable", "scope", sc.Name, "err", err)
		c.deny(http.StatusBadGateway, "credential-unavailable", "the broker could not read the scope's credential")
		return
	}
	ctx, cancel := context.WithTimeout(ctx, b.cfg.Timeout)
	defer cancel()
	up, counted, err := c.upstreamRequest(ctx, sc, rest, secret)
	if err != nil {
		c.deny(http.StatusBadRequest, "bad-request", "the request could not be made")
		return
	}
	resp, err := b.client[sc.Name].Do(up)
	c.ev.BytesUp = counted.n
	if err != nil {
		c.upstreamFailed(err, sc.Name, secret)
		return
	}
	defer resp.Body.Close()
	c.relay(resp, sc, secret)
}

// call is one broker call on its way through: the event it records and
// where its answer goes.
type call struct {
	b     *Broker
	r     *airlock.BrokerCall
	w     airlock.BrokerReply
	ev    *airlock.EgressEvent
	start time.Time
}

func (b *Broker) newCall(r *airlock.BrokerCall, w airlock.BrokerReply) *call {
	c := r.Caller
	return &call{b: b, r: r, w: w, start: time.Now(), ev: &airlock.EgressEvent{
		TenantID:    c.TenantID,
		SessionID:   c.SessionID,
		ExecutionID: c.ExecutionID,
		Time:        b.cfg.Now().UTC(),
		Kind:        airlock.EgressBroker,
		Protocol:    r.Method,
	}}
}

// finish records the call's event with its verdict.
func (c *call) finish(verdict, reason string) {
	c.ev.Verdict, c.ev.Reason = verdict, reason
	c.ev.DurationMS = time.Since(c.start).Milliseconds()
	c.b.cfg.Record(c.ev)
}

// deny answers a problem and records the refusal.
func (c *call) deny(status int, reason, detail string) {
	writeProblem(c.w, status, reason, detail)
	if c.ev.Detail == "" {
		c.ev.Detail = detail
	} else {
		c.ev.Detail += ": " + detail
	}
	c.finish(airlock.VerdictDenied, reason)
}

// authorize finds the call's scope and checks, in order, that the sandbox
// holds it, that the tenant is granted it (at every call: a grant taken
// back stops live sessions' calls at once, and a sandbox of another tenant
// never gets through), and that its method and path are allowed. On a
// refusal it has answered and recorded, and ok is false.
func (c *call) authorize(ctx context.Context) (sc *Scope, rest string, ok bool) {
	r, b := c.r, c.b
	scopeName, rest, err := splitCall(r.Path, r.EscapedPath)
	c.ev.Name = clip(scopeName)
	c.ev.Detail = clip(r.Method + " " + r.EscapedPath)
	if err != nil {
		c.deny(http.StatusForbidden, "bad-path", err.Error())
		return nil, "", false
	}
	sc = b.scopes[scopeName]
	switch {
	case sc == nil:
		c.deny(http.StatusForbidden, "unknown-scope", fmt.Sprintf("no broker scope %q", scopeName))
		return nil, "", false
	case !slices.Contains(r.Caller.Scopes, scopeName):
		c.deny(http.StatusForbidden, "scope-not-held", fmt.Sprintf("this sandbox does not hold broker scope %q", scopeName))
		return nil, "", false
	}
	if err := b.Granted(ctx, r.Caller.TenantID, scopeName); err != nil {
		if airlock.ErrorCode(err) == airlock.EFORBIDDEN {
			c.deny(http.StatusForbidden, "scope-not-granted", fmt.Sprintf("the tenant was not granted broker scope %q", scopeName))
		} else {
			b.cfg.Logger.Error("broker grant check failed", "scope", scopeName, "err", err)
			c.deny(http.StatusServiceUnavailable, "grant-unavailable", "the broker could not check the tenant's grant")
		}
		return nil, "", false
	}
	if !sc.methods[r.Method] {
		c.deny(http.StatusForbidden, "method-not-allowed", fmt.Sprintf("scope %s allows %s, not %s", scopeName, strings.Join(sc.Methods, ", "), r.Method))
		return nil, "", false
	}
	if !slices.ContainsFunc(sc.Paths, func(p string) bool { return matchPath(p, rest) }) {
		c.deny(http.StatusForbidden, "path-not-allowed", fmt.Sprintf("scope %s does not allow %s", scopeName, rest))
		return nil, "", false
	}
	return sc, rest, true
}

// upstreamRequest builds the request to the scope's upstream: the call's
// method, path below the scope's base, query, headers (less the dropped
// ones and any the sandbox set for the credential) and a size-limited,
// counted body, with the credential added.
func (c *call) upstreamRequest(ctx context.Context, sc *Scope, rest, secret string) (*http.Request, *countReader, error) {
	r := c.r
	target := *sc.base
	target.Path = sc.base.Path + rest
	target.RawPath = ""
	target.RawQuery = r.RawQuery
	c.ev.Host = sc.base.Host
	c.ev.Port = portOf(sc.base)

	cr := &countReader{}
	var body io.Reader
	if r.Body != nil {
		cr.r = http.MaxBytesReader(nil, io.NopCloser(r.Body), c.b.cfg.MaxRequestBytes)
		body = cr
	}
	up, err := http.NewRequestWithContext(ctx, r.Method, target.String(), body)
	if err != nil {
		return nil, nil, err
	}
	for k, vs := range r.Header {
		ck := http.CanonicalHeaderKey(k)
		if slices.Contains(dropRequest, ck) || ck == sc.Header {
			continue
		}
		up.Header[ck] = vs
	}
	if r.ContentLength > 0 {
		up.ContentLength = r.ContentLength
	}
	up.Header.Set(sc.Header, strings.ReplaceAll(sc.Format, "{credential}", secret))
	return up, cr, nil
}

// upstreamFailed answers a call the upstream did not answer: too large a
// body is the sandbox's fault (413), anything else a 502 whose logged and
// recorded cause has the credential redacted.
func (c *call) upstreamFailed(err error, scope, secret string) {
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		c.deny(http.StatusRequestEntityTooLarge, "request-too-large", fmt.Sprintf("request bodies are limited to %d bytes", c.b.cfg.MaxRequestBytes))
		return
	}
	rd := newRedactor(secret)
	c.b.cfg.Logger.Warn("broker upstream call failed", "scope", scope, "err", rd.redact(err.Error()))
	writeProblem(c.w, http.StatusBadGateway, "upstream-failed", "the upstream did not answer")
	c.ev.Detail += ": " + rd.redact(err.Error())
	c.finish(airlock.VerdictFailed, "upstream-failed")
}

// relay streams the upstream's answer back to the sandbox with every
// header and body byte that could carry the credential removed.
func (c *call) relay(resp *http.Response, sc *Scope, secret string) {
	rd := newRedactor(secret)
	// A body the transport did not decode (it asks for gzip and decodes
	// that itself) cannot be searched for the credential.
	if ce := resp.Header.Get("Content-Encoding"); ce != "" && !strings.EqualFold(ce, "identity") {
		writeProblem(c.w, http.StatusBadGateway, "upstream-encoded", "the upstream's answer is encoded ("+clip(ce)+"); the broker returns only answers it can check for the credential")
		c.ev.Detail += fmt.Sprintf(" -> %d: Content-Encoding %s refused", resp.StatusCode, clip(ce))
		c.finish(airlock.VerdictFailed, "upstream-encoded")
		return
	}
	h := http.Header{}
	for k, vs := range resp.Header {
		ck := http.CanonicalHeaderKey(k)
		if slices.Contains(dropResponse, ck) || slices.ContainsFunc(sc.StripResponseHeaders, func(s string) bool { return strings.EqualFold(s, ck) }) {
			continue
		}
		// A header that carries the credential, in its name or a value
		// and in any form the redactor knows, is dropped whole.
		if rd.contains(k) || slices.ContainsFunc(vs, rd.contains) {
			continue
		}
		h[ck] = vs
	}
	c.w.Start(resp.StatusCode, h)
	n, err := rd.copy(c.w, io.LimitReader(resp.Body, c.b.cfg.MaxResponseBytes+1), c.b.cfg.MaxResponseBytes)
	c.ev.BytesDown = n
	c.ev.Detail += " -> " + strconv.Itoa(resp.StatusCode)
	if err != nil {
		c.ev.Detail += ": " + err.Error()
	}
	c.finish(airlock.VerdictAllowed, "")
}

func portOf(u interface{ Port() string }) int {
	p, _ := strconv.Atoi(u.Port())
	return p
}

func clip(s string) string {
	if len(s) > 512 {
		return s[:512]
	}
	return s
}

// writeProblem answers inside the sandbox with a problem document.
func writeProblem(w airlock.BrokerReply, status int, typ, detail string) {
	body, _ := json.Marshal(map[string]any{
		"type":   problem.TypePrefix + "broker-" + typ,
		"title":  http.StatusText(status),
		"status": status,
		"detail": detail,
	})
	w.Start(status, http.Header{"Content-Type": {"application/problem+json"}})
	w.Write(append(body, '\n'))
}

type countReader struct {
	r io.Reader
	n int64
}

func (c *countReader) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	c.n += int64(n)
	return n, err
}
