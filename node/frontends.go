package node

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/api/console"
	"github.com/airlockhq/airlock/api/e2b"
	"github.com/airlockhq/airlock/api/mcp"
	"github.com/airlockhq/airlock/api/rest"
	"github.com/airlockhq/airlock/internal/httpmetrics"
	"github.com/airlockhq/airlock/internal/tracing"
	"github.com/airlockhq/airlock/service/preview"
	"github.com/airlockhq/airlock/service/watch"
)

// listen binds the API's address and makes what it serves: the REST API
// with /mcp and /console beside it, the E2B routes in front (their paths
// and headers never collide), the fleet's routing in front of all. It
// also starts the debug and the E2B-alone listeners.
func (n *Node) listen(ctx context.Context) error {
	c := n.cfg
	signingKey, err := c.Blobs.signingKey(c.StateDir)
	if err != nil {
		return err
	}
	// Listen first: whether /metrics needs its key depends on the
	// address really bound.
	if n.ln, err = net.Listen("tcp", c.Listen); err != nil {
		return err
	}
	n.onClose(func() { n.ln.Close() })
	loopback := loopbackOnly(n.ln.Addr())
	if !loopback && c.API.MetricsKey == "" {
		n.logger.Warn("/metrics is closed (403): airlockd listens beyond loopback without --metrics-key", "addr", n.ln.Addr().String())
	}
	sessions, err := n.sessionService()
	if err != nil {
		return err
	}
	restCfg := rest.Config{
		Store:        n.Store,
		Events:       n.Store,
		Blobs:        n.Blobs,
		Executor:     n.OneShot,
		ReadyChecks:  n.readyChecks(),
		MicroVM:      microvmAccel(n.Backends),
		Metrics:      promhttp.HandlerFor(n.Registry, promhttp.HandlerOpts{}),
		MetricsKey:   c.API.MetricsKey,
		LoopbackOnly: loopback,
		PublicURL:    c.API.PublicURL,
		Sessions:     sessions,
		Usage:        n.Quotas,
		Templates:    n.templateService(),
		Admin:        n.Store,
		Audit:        n.Store,
		QuotaNames:   quotaNames(),
		Keep:         n.Sessions,
		Feed:         n.Store,
		PTYs:         n.Sessions,
		Volumes:      n.Volumes,
		SigningKey:   signingKey,
		Logger:       n.logger,
	}
	if n.Webhooks != nil {
		restCfg.Webhooks = n.Webhooks
	}
	if c.E2B.Enabled || c.E2B.Listen != "" {
		// Made before the preview service, which takes its sandboxes'
		// traffic tokens; E2B's getHost(port) names a preview URL.
		o := c.E2B
		o.Domain = c.Preview.Domain
		if n.E2B, err = newE2B(o, c.Sessions, c.StateDir, n.Sessions, n.Store, c.Egress.allowFor, n.templateResolver(), n.logger); err != nil {
			return err
		}
	}
	if n.Sessions != nil {
		maxBytes := c.Preview.MaxMiB << 20
		if maxBytes == 0 {
			maxBytes = -1 // no limit
		}
		pv, err := preview.New(preview.Config{
			Targets: n.Sessions, Keys: n.Store, SigningKey: signingKey, Domain: c.Preview.Domain,
			MaxConns: c.Preview.MaxConns, MaxBytes: maxBytes, Audit: n.Store, Logger: n.logger,
			SandboxTokens: sandboxTokens(n.E2B),
		})
		if err != nil {
			return err
		}
		n.Preview = pv
		n.onClose(pv.Close)
		restCfg.Preview = pv
	}
	if n.parts.rest != nil {
		n.parts.rest(&restCfg)
	}
	api, err := rest.New(restCfg)
	if err != nil {
		return err
	}
	n.api = api
	// MCP's tool calls go through the fleet like any other request.
	mcpAPI := api.Handler()
	if n.Fleet != nil {
		mcpAPI = n.Fleet.Handler(mcpAPI)
	}
	if n.parts.frontDoor != nil {
		n.Handler = n.parts.frontDoor(n, api.Handler())
	} else if n.Handler, err = frontDoor(api.Handler(), mcpAPI, n.Store, n.logger); err != nil {
		return err
	}
	if c.E2B.Enabled || c.E2B.Listen != "" {
		if c.E2B.Enabled {
			n.Handler = n.E2B.Wrap(n.Handler)
		}
	}
	if n.Preview != nil {
		// A Host under the preview domain is a preview, never the API.
		n.Handler = n.Preview.Wrap(n.Handler)
	}
	if n.Fleet != nil {
		// Any node takes any request: new runs and sessions are placed,
		// a session's requests go to its node.
		n.Handler = n.Fleet.Handler(n.Handler)
	}
	metrics, err := httpmetrics.New(n.Registry, n.routeOf)
	if err != nil {
		return err
	}
	n.srv = &http.Server{
		// The receive span of every request, and its count and time.
		Handler:           tracing.Middleware(metrics.Wrap(n.Handler)),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       time.Minute,
		WriteTimeout:      c.MaxTimeout + 2*time.Minute,
		IdleTimeout:       2 * time.Minute,
		BaseContext:       func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
	}
	// HTTP/2 without TLS (prior knowledge, h2c) beside HTTP/1.1: preview
	// URLs carry it through to the client; behind a TLS proxy, the
	// proxy speaks h2 to browsers.
	var protos http.Protocols
	protos.SetHTTP1(true)
	protos.SetUnencryptedHTTP2(true)
	n.srv.Protocols = &protos
	if n.Watch != nil {
		n.srv.RegisterOnShutdown(n.Watch.Close) // watches last as long as their sessions: end them
	}
	if c.DebugListen != "" {
		_, stopDebug, err := serveDebug(c.DebugListen, c.API.MetricsKey, n.logger)
		if err != nil {
			return err
		}
		n.onClose(stopDebug)
	}
	if c.E2B.Listen != "" {
		var e2bHandler http.Handler = n.E2B.Handler()
		if n.Fleet != nil {
			e2bHandler = n.Fleet.Handler(e2bHandler) // placed and routed as on --listen
		}
		closeE2B, err := serveE2B(c.E2B.Listen, e2bHandler, n.srv, n.logger)
		if err != nil {
			return err
		}
		n.onClose(closeE2B)
	}
	return nil
}

// frontDoor is what airlockd serves: the REST API, and beside it the MCP
// server at /mcp, whose tool calls are requests to mcpAPI (that same API,
// routed by the fleet when there is one) made in-process with the
// caller's key, and the web console at /console/, a page that speaks
// that same API from the browser.
func frontDoor(api, mcpAPI http.Handler, store airlock.Store, logger *slog.Logger) (http.Handler, error) {
	mcpHandler, err := mcp.NewHandler(mcp.HandlerConfig{API: mcpAPI, Keys: store, Logger: logger, Version: "airlockd"})
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", mcpHandler)
	mux.Handle(console.Prefix, console.Handler())
	mux.Handle(strings.TrimSuffix(console.Prefix, "/"), console.Handler())
	mux.Handle("/", api)
	return mux, nil
}

// routeOf names the route of a request for the request metrics: the
// REST API's path pattern, /mcp, the console, or e2b for every request
// of the E2B API; never a raw path.
func (n *Node) routeOf(r *http.Request) string {
	p := r.URL.Path
	switch {
	case n.E2B != nil && n.cfg.E2B.Enabled && (r.Header.Get("E2b-Sandbox-Id") != "" || e2b.IsE2BPath(p)):
		return "e2b"
	case p == "/mcp":
		return "/mcp"
	case strings.HasPrefix(p, console.Prefix) || p == strings.TrimSuffix(console.Prefix, "/"):
		return console.Prefix
	}
	return n.api.Route(r)
}

// sessionService is the session service the REST API serves: the
// sessions behind the watch service (GET /v1/sessions/{id}/output), or
// what WithSessionService makes of them.
func (n *Node) sessionService() (airlock.SessionService, error) {
	if n.parts.wrapSessions != nil {
		return n.parts.wrapSessions(n.Sessions), nil
	}
	w, err := watch.New(watch.Config{Sessions: n.Sessions})
	if err != nil {
		return nil, err
	}
	n.Watch = w
	return w, nil
}

// sandboxTokens are the E2B sandboxes' traffic tokens, which open their
// preview URLs (getHost); none without the E2B API.
func sandboxTokens(s *e2b.Server) preview.SandboxTokens {
	if s == nil {
		return nil
	}
	return s
}
