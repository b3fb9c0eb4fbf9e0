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
	"time"

	"github.com/airlockhq/airlock"
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

// ServeBroker handles one call from a sandbox: /<scope>/<path>.
func (b *Broker) ServeBroker(w http.ResponseWriter, r *http.Request, c airlock.BrokerCaller) {
	k := &call{b: b, w: w, r: r, start: time.Now(), ev: &airlock.EgressEvent{
		TenantID:    c.TenantID,
		SessionID:   c.SessionID,
		ExecutionID: c.ExecutionID,
		Time:        b.cfg.Now().UTC(),
		Kind:        airlock.EgressBroker,
		Protocol:    r.Method,
	}}
	sc, rest, ok := k.authorize(c)
	if !ok {
		return
	}
	secret, err := sc.credential()
	if err != nil {
		b.cfg.Logger.Error("broker credential unavailable", "scope", sc.Name, "err", err)
		k.deny(http.StatusBadGateway, "credential-unavailable", "the broker could not read the scope's credential")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), b.cfg.Timeout)
	defer cancel()
	up, sent, err := k.outbound(ctx, sc, rest, secret)
	if err != nil {
		k.deny(http.StatusBadRequest, "bad-request", "the request could not be made")
		return
	}
	resp, err := b.client[sc.Name].Do(up)
	k.ev.BytesUp = sent.n
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			k.deny(http.StatusRequestEntityTooLarge, "request-too-large", fmt.Sprintf("request bodies are limited to %d bytes", b.cfg.MaxRequestBytes))
			return
		}
		rd := newRedactor(secret)
		b.cfg.Logger.Warn("broker upstream call failed", "scope", sc.Name, "err", rd.redact(err.Error()))
		writeProblem(w, http.StatusBadGateway, "upstream-failed", "the upstream did not answer")
		k.ev.Detail += ": " + rd.redact(err.Error())
		k.finish(airlock.VerdictFailed, "upstream-failed")
		return
	}
	defer resp.Body.Close()
	k.answer(sc, resp, newRedactor(secret))
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
func writeProblem(w http.ResponseWriter, status int, typ, detail string) {
	body, _ := json.Marshal(map[string]any{
		"type":   "urn:airlock:problem:broker-" + typ,
		"title":  http.StatusText(status),
		"status": status,
		"detail": detail,
	})
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(status)
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
