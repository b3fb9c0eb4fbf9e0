package preview

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/airlockhq/airlock"
)

// Defaults of Config.
const (
	DefaultMaxConns    = 64
	DefaultMaxBytes    = 10 << 30 // per session, both ways together
	DefaultTokenTTL    = time.Hour
	MaxTokenTTL        = 7 * 24 * time.Hour
	MaxTokensPerPort   = 100
	minSigningKeyBytes = 32
)

// Config configures a Service.
type Config struct {
	// Targets finds the sessions this node holds (the session manager).
	Targets airlock.PreviewTargets
	// Keys resolves API keys (for Host-form requests, which no REST
	// route authenticates).
	Keys airlock.KeyResolver
	// SigningKey is the node's secret the token key is derived from; at
	// least 32 bytes, the same on every node of a fleet.
	SigningKey []byte
	// Domain, when set, turns on Host routing: {port}-{session_id}.Domain.
	Domain string
	// MaxConns bounds the requests (and WebSockets) open at once to one
	// session's ports; DefaultMaxConns if zero.
	MaxConns int
	// MaxBytes bounds the bytes one session's previews carry, both ways,
	// over its life; DefaultMaxBytes if zero, no limit if negative.
	MaxBytes int64
	// SandboxTokens, when set, admits a sandbox-wide access token issued
	// by another front end (E2B's trafficAccessToken, sent as
	// E2B-Traffic-Access-Token); nil admits none.
	SandboxTokens SandboxTokens
	// Audit receives one entry per request (kind preview); nil keeps none.
	Audit airlock.EgressStore
	// Logger; slog.Default() if nil. Now; time.Now if nil.
	Logger *slog.Logger
	Now    func() time.Time
}

// SandboxTokens checks access tokens that open every port of one
// sandbox, issued by another front end (E2B's trafficAccessToken).
type SandboxTokens interface {
	// TokenHeader is the request header the token travels in; it is
	// removed before a request goes to the sandbox.
	TokenHeader() string
	// TokenTenant returns the tenant a token of the session was issued
	// to, or EUNAUTHORIZED when it is not one (or its key was revoked).
	TokenTenant(ctx context.Context, sessionID, token string) (*airlock.Tenant, error)
}

// Validate checks c.
func (c *Config) Validate() error {
	switch {
	case c.Targets == nil:
		return fmt.Errorf("preview: Targets is required")
	case c.Keys == nil:
		return fmt.Errorf("preview: Keys is required")
	case len(c.SigningKey) < minSigningKeyBytes:
		return fmt.Errorf("preview: the signing key must be at least %d bytes", minSigningKeyBytes)
	case c.MaxConns < 0:
		return fmt.Errorf("preview: MaxConns must not be negative")
	}
	if c.Domain != "" {
		if err := ValidDomain(c.Domain); err != nil {
			return err
		}
	}
	return nil
}

// ValidDomain checks a preview domain: a DNS name of two or more labels
// of [a-z0-9-], no leading or trailing dot, no port.
func ValidDomain(d string) error {
	if len(d) > 200 || d != strings.ToLower(d) {
		return fmt.Errorf("preview: domain %q must be lower case and at most 200 characters", d)
	}
	labels := strings.Split(d, ".")
	if len(labels) < 2 {
		return fmt.Errorf("preview: domain %q needs at least two labels (e.g. preview.example.com)", d)
	}
	for _, l := range labels {
		if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return fmt.Errorf("preview: domain %q has a bad label %q", d, l)
		}
		for _, c := range l {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
				return fmt.Errorf("preview: domain %q has a bad label %q", d, l)
			}
		}
	}
	return nil
}
