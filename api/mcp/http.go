package mcp

import (
	"context"
	"log/slog"
	"net/http"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/auth"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/api/rest"
	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/internal/problem"
)

// Keys resolves API keys to keys and tenants: the store, as the REST API
// uses it (every request checks the key's state: revoked, expired).
type Keys = airlock.KeyResolver

// DefaultMaxBodyBytes bounds one request to /mcp: a tool call carries at
// most 1 MiB of code or 4 MiB of file content, which JSON escaping can
// grow.
const DefaultMaxBodyBytes = 16 << 20

// maxKeyBytes bounds a bearer key before it is hashed and looked up.
const maxKeyBytes = 512

// HandlerConfig configures NewHandler.
type HandlerConfig struct {
	// API is the REST API's handler: every tool call is a request to it,
	// made in-process (Loopback) with the caller's key. Required.
	API http.Handler
	// Keys authenticates the bearer key of each request to /mcp, before
	// the MCP layer sees it. Required.
	Keys Keys
	// MaxBodyBytes bounds a request body; DefaultMaxBodyBytes if zero.
	MaxBodyBytes int64
	// Version is the server's version as reported to clients.
	Version string
	// Logger is slog.Default() if nil.
	Logger *slog.Logger
}

// Validate reports whether c can be used.
func (c HandlerConfig) Validate() error {
	switch {
	case c.API == nil:
		return airlock.Errorf(airlock.EINVALID, "mcp: the REST API handler is required")
	case c.Keys == nil:
		return airlock.Errorf(airlock.EINVALID, "mcp: a key store is required")
	case c.MaxBodyBytes < 0:
		return airlock.Errorf(airlock.EINVALID, "mcp: max body bytes must not be negative")
	}
	return nil
}

// caller is who sent a request to /mcp, as its tool calls need it.
type caller struct {
	key    string
	tenant *airlock.Tenant
	base   string // the base URL the caller reached us by
}

type callerKey struct{}

// NewHandler returns the handler of /mcp: the MCP streamable HTTP
// transport, stateless (every request stands alone, so a restart of
// airlockd loses nothing of a client's), behind bearer keys. A missing or
// unknown key is a 401 problem document before the MCP layer reads the
// body.
func NewHandler(cfg HandlerConfig) (http.Handler, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.MaxBodyBytes == 0 {
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	hc := &http.Client{Transport: Loopback{Handler: cfg.API}, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse // the API redirects only to clean paths; never follow
	}}
	srv, err := NewServer(Config{
		Version: cfg.Version,
		Logger:  cfg.Logger,
		Client: func(ctx context.Context, req *sdk.CallToolRequest) (API, error) {
			var c *caller
			if req != nil && req.Extra != nil && req.Extra.TokenInfo != nil {
				c, _ = req.Extra.TokenInfo.Extra["caller"].(*caller)
			}
			if c == nil {
				return nil, airlock.ErrUnauthorized
			}
			return client.New(client.Config{BaseURL: c.base, APIKey: c.key, HTTPClient: hc, UserAgent: "airlock-mcp/1"})
		},
	})
	if err != nil {
		return nil, err
	}
	transport := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, &sdk.StreamableHTTPOptions{
		Stateless: true,
		// Every request must carry a valid key, so a page that rebinds a
		// name to loopback gains nothing; the check would also refuse
		// every request a reverse proxy on this host passes on.
		DisableLocalhostProtection: true,
		MaxRequestBodyBytes:        cfg.MaxBodyBytes,
		Logger:                     quiet(cfg.Logger),
	})
	verify := func(ctx context.Context, _ string, _ *http.Request) (*auth.TokenInfo, error) {
		c, _ := ctx.Value(callerKey{}).(*caller)
		if c == nil {
			return nil, auth.ErrInvalidToken
		}
		return &auth.TokenInfo{UserID: c.tenant.ID, Extra: map[string]any{"caller": c}}, nil
	}
	h := auth.RequireBearerToken(verify, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})(transport)
	return &handler{cfg: cfg, next: h}, nil
}

type handler struct {
	cfg  HandlerConfig
	next http.Handler
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	key, ok := bearerKey(r.Header.Get("Authorization"))
	if !ok {
		h.unauthorized(w)
		return
	}
	p, err := rest.Authenticator{Keys: h.cfg.Keys}.AuthenticateSecret(r, key)
	if err == nil && p.Tenant == nil {
		err = airlock.ErrUnauthorized // an operator key belongs to no tenant
	}
	if airlock.ErrorCode(err) == airlock.EUNAUTHORIZED {
		h.unauthorized(w)
		return
	} else if err != nil {
		h.problem(w, err)
		return
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	host := r.Host
	if host == "" || strings.ContainsAny(host, "/?#@ \\") {
		host = "localhost"
	}
	c := &caller{key: key, tenant: p.Tenant, base: scheme + "://" + host}
	h.next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), callerKey{}, c)))
}

// bearerKey reads "Bearer <key>" as the REST API does.
func bearerKey(header string) (string, bool) {
	scheme, key, ok := strings.Cut(header, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	key = strings.TrimSpace(key)
	if key == "" || len(key) > maxKeyBytes || strings.ContainsAny(key, " \t") {
		return "", false
	}
	return key, true
}

func (h *handler) unauthorized(w http.ResponseWriter) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="airlock"`)
	writeProblem(w, airlock.ErrUnauthorized)
}

// problem answers with err as the REST API would; internal errors are
// logged, never sent.
func (h *handler) problem(w http.ResponseWriter, err error) {
	if problem.WriteError(w, err) {
		h.cfg.Logger.Error("mcp: authenticating a request", "err", err)
	}
}

func writeProblem(w http.ResponseWriter, err error) { problem.WriteError(w, err) }
