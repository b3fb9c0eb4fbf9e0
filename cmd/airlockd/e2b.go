package main

import (
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"sort"
	"strings"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/api/e2b"
	"github.com/airlockhq/airlock/internal/tracing"
	"github.com/airlockhq/airlock/service/session"
)

// e2bOptions are the operator's settings of the E2B-compatible API.
type e2bOptions struct {
	enabled   bool
	listen    string
	templates templateFlag
}

func (o *e2bOptions) register(fs *flag.FlagSet) {
	o.templates = templateFlag{}
	fs.BoolVar(&o.enabled, "e2b", true, "serve the E2B-compatible API (for E2B's SDKs with E2B_API_URL and E2B_SANDBOX_URL set to this server) on --listen")
	fs.StringVar(&o.listen, "e2b-listen", "", "also serve the E2B-compatible API alone on this address (e.g. 127.0.0.1:3000); off when empty")
	fs.Var(o.templates, "e2b-template", "E2B template name to image, NAME=IMAGE (repeatable; defaults code-interpreter-v1=python-ds, code-interpreter=python-ds, base=base)")
}

// templateFlag collects --e2b-template NAME=IMAGE.
type templateFlag map[string]string

func (f templateFlag) String() string {
	var out []string
	for k, v := range f {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return strings.Join(out, ",")
}

func (f templateFlag) Set(v string) error {
	name, img, ok := strings.Cut(v, "=")
	if !ok || name == "" || img == "" {
		return fmt.Errorf("want NAME=IMAGE")
	}
	f[name] = img
	return nil
}

// newE2B makes the E2B front-end on the session manager. Its secret,
// from which every sandbox's access tokens are derived, is kept in
// <state-dir>/e2b.key, so the tokens outlive a restart as the sessions
// do.
// e2bStore is what the E2B routes keep and read: their sandbox records,
// and tenants by API key.
type e2bStore interface {
	airlock.E2BStore
	e2b.Tenants
}

func newE2B(o e2bOptions, so sessionOptions, stateDir string, sessions *session.Manager, store e2bStore, networkAllow func(*airlock.Tenant) []string, logger *slog.Logger) (*e2b.Server, error) {
	secret, err := loadOrCreateKey(filepath.Join(stateDir, "e2b.key"))
	if err != nil {
		return nil, err
	}
	templates := map[string]string{}
	for k, v := range e2b.DefaultTemplates {
		templates[k] = v
	}
	for k, v := range o.templates {
		templates[k] = v
	}
	return e2b.New(e2b.Config{
		Sessions:          sessions,
		Store:             store,
		Tenants:           store,
		Secret:            secret,
		Templates:         templates,
		MaxLifetime:       so.maxLifetime,
		MaxProcessTimeout: so.maxExecTimeout,
		NetworkAllow:      networkAllow,
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
