package node

import (
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/api/e2b"
	"github.com/airlockhq/airlock/internal/tracing"
	"github.com/airlockhq/airlock/service/session"
)

// E2BConfig are the settings of the E2B-compatible API.
type E2BConfig struct {
	// Enabled serves it on the node's API listener.
	Enabled bool
	// Listen also serves it alone on this address; off when empty.
	Listen string
	// Templates map E2B template names to images, over
	// e2b.DefaultTemplates.
	Templates map[string]string
	// Domain is the domain sandboxes are given, which E2B's SDKs build
	// getHost(port) from ({port}-{sandboxID}.{domain}): the node sets it
	// to --preview-domain when there is one, so that host is a preview
	// URL; e2b.DefaultDomain when empty.
	Domain string
}

// e2bStore is what the E2B routes keep and read: their sandbox records,
// and tenants by API key.
type e2bStore interface {
	airlock.E2BStore
	e2b.Tenants
}

// newE2B makes the E2B front-end on the session manager. Its secret,
// from which every sandbox's access tokens are derived, is kept in
// <state-dir>/e2b.key, so the tokens outlive a restart as the sessions
// do.
func newE2B(o E2BConfig, so SessionsConfig, stateDir string, sessions *session.Manager, store e2bStore, networkAllow func(*airlock.Tenant) []string, userTemplates airlock.TemplateResolver, logger *slog.Logger) (*e2b.Server, error) {
	secret, err := loadOrCreateKey(filepath.Join(stateDir, "e2b.key"))
	if err != nil {
		return nil, err
	}
	templates := map[string]string{}
	for k, v := range e2b.DefaultTemplates {
		templates[k] = v
	}
	for k, v := range o.Templates {
		templates[k] = v
	}
	return e2b.New(e2b.Config{
		Sessions:          sessions,
		Store:             store,
		Tenants:           store,
		Secret:            secret,
		Templates:         templates,
		UserTemplates:     userTemplates,
		MaxLifetime:       so.MaxLifetime,
		MaxProcessTimeout: so.MaxExecTimeout,
		NetworkAllow:      networkAllow,
		Domain:            o.Domain,
		Logger:            logger,
	})
}

// serveE2B serves the E2B API alone on --e2b-listen; the listener is
// closed with the returned function.
func serveE2B(addr string, h http.Handler, base *http.Server, logger *slog.Logger) (func(), error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--e2b-listen: %w", err)
	}
	hs := &http.Server{
		Handler:           tracing.Middleware(h),
		ReadHeaderTimeout: base.ReadHeaderTimeout,
		ReadTimeout:       base.ReadTimeout,
		WriteTimeout:      base.WriteTimeout,
		IdleTimeout:       base.IdleTimeout,
		BaseContext:       base.BaseContext,
	}
	go hs.Serve(ln)
	logger.Info("e2b API serving", "addr", ln.Addr().String())
	return func() { hs.Close() }, nil
}
