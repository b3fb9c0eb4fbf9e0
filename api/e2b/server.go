package e2b

import (
	"log/slog"
	"net/http"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/api/internal/upload"
)

// Headers the SDKs send to reach a sandbox.
const (
	headerSandboxID    = "E2b-Sandbox-Id"
	headerSandboxPort  = "E2b-Sandbox-Port"
	headerAccessToken  = "X-Access-Token"
	headerTrafficToken = "E2B-Traffic-Access-Token"
	headerAPIKey       = "X-API-KEY"

	portEnvd        = "49983"
	portInterpreter = "49999"
)

// Server serves the E2B API. It is safe for concurrent use.
type Server struct {
	cfg        Config
	uploadRate upload.Rate
	log        *slog.Logger
	templates  map[string]string
	envd       http.Handler // the envd services of a sandbox
	procs      *processTable

	mu        sync.Mutex
	sandboxes map[string]*sandboxRef // data-plane lookups, by sandbox ID
	ctxLocks  map[string]*sync.Mutex // default-context creation, by sandbox ID
}

// New returns a server for cfg.
func New(cfg Config) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Templates == nil {
		cfg.Templates = DefaultTemplates
	}
	if cfg.Domain == "" {
		cfg.Domain = DefaultDomain
	}
	if cfg.DefaultTimeout == 0 {
		cfg.DefaultTimeout = DefaultTimeout
	}
	if cfg.ClientID == "" {
		cfg.ClientID = "airlock"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	cfg.Secret = append([]byte(nil), cfg.Secret...)
	rate := upload.Rate{MinBytesPerSec: cfg.UploadMinRate, Window: cfg.UploadRateWindow}
	if err := rate.Validate(); err != nil {
		return nil, airlock.Errorf(airlock.EINVALID, "e2b: %v", err)
	}
	s := &Server{
		cfg:        cfg,
		uploadRate: rate,
		log:        cfg.Logger,
		templates:  cfg.Templates,
		procs:      newProcessTable(),
		sandboxes:  map[string]*sandboxRef{},
		ctxLocks:   map[string]*sync.Mutex{},
	}
	s.envd = s.envdHandler()
	return s, nil
}

// Handler serves the E2B API alone (for a listener of its own): every
// other request gets a 404 in E2B's shape.
func (s *Server) Handler() http.Handler {
	return s.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusNotFound, map[string]any{"code": 404, "message": "not an E2B API path: " + clip(r.URL.Path, 200)})
	}))
}

// Wrap serves E2B requests and passes every other request to next (the
// native API on the same listener): a request is E2B's if it carries
// E2b-Sandbox-Id or its path is one of E2B's, none of which the native
// API uses.
func (s *Server) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Header.Get(headerSandboxID) != "" || dataPlanePath(r.URL.Path):
			s.recoverPanics(s.serveSandbox)(w, r)
		case controlPlanePath(r.URL.Path):
			s.recoverPanics(s.serveControl)(w, r)
		default:
			next.ServeHTTP(w, r)
		}
	})
}

// IsE2BPath reports whether a path belongs to the E2B API (without
// looking at headers).
func IsE2BPath(p string) bool { return dataPlanePath(p) || controlPlanePath(p) }

// controlPrefixes are the first segments of E2B's control plane.
var controlPrefixes = []string{"/sandboxes", "/v2/sandboxes", "/templates", "/v2/templates", "/v3/templates", "/volumes", "/secrets", "/snapshots"}

func controlPlanePath(p string) bool {
	for _, pre := range controlPrefixes {
		if p == pre || strings.HasPrefix(p, pre+"/") {
			return true
		}
	}
	return false
}

func dataPlanePath(p string) bool {
	return strings.HasPrefix(p, "/process.Process/") || strings.HasPrefix(p, "/filesystem.Filesystem/") ||
		p == "/files" || p == "/execute" || p == "/contexts" || strings.HasPrefix(p, "/contexts/") || p == "/health"
}

// recoverPanics answers 500 for a handler that panicked, instead of
// dropping the connection, and logs the stack.
func (s *Server) recoverPanics(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				s.log.Error("e2b: panic serving a request", "path", r.URL.Path, "panic", v, "stack", string(debug.Stack()))
				writeJSON(w, http.StatusInternalServerError, map[string]any{"code": 500, "message": "internal error"})
			}
		}()
		h(w, r)
	}
}

// authenticate resolves the request's API key (X-API-KEY; a bearer key
// works too) to a tenant's key, or answers 401: for a missing, unknown,
// revoked or expired key, and for an operator key (it belongs to no
// tenant).
func (s *Server) authenticate(w http.ResponseWriter, r *http.Request) *airlock.Principal {
	key := strings.TrimSpace(r.Header.Get(headerAPIKey))
	if key == "" {
		if scheme, k, ok := strings.Cut(r.Header.Get("Authorization"), " "); ok && strings.EqualFold(scheme, "Bearer") {
			key = strings.TrimSpace(k)
		}
	}
	p, err := airlock.Authenticate(r.Context(), s.cfg.Tenants, key, s.cfg.Now())
	if err == nil && p.Tenant == nil {
		err = airlock.ErrUnauthorized
	}
	if airlock.ErrorCode(err) == airlock.EUNAUTHORIZED {
		writeJSON(w, http.StatusUnauthorized, map[string]any{"code": 401, "message": "missing, invalid, revoked or expired API key (send it in X-API-KEY)"})
		return nil
	}
	if err != nil {
		s.writeError(w, r, err)
		return nil
	}
	return p
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
