package rest

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strings"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/api/internal/upload"
	"github.com/airlockhq/airlock/internal/problem"
)

// Defaults and bounds of Config.
const (
	DefaultArtifactURLTTL = 24 * time.Hour
	MinSigningKeyBytes    = 32
)

// Config configures a Server.
type Config struct {
	Store airlock.Store // required
	// Events lists the tenant's abuse events (GET /v1/events); nil
	// serves an empty list.
	Events airlock.AbuseStore
	// Feed serves the event feed (GET /v1/events?cursor=: session
	// transitions beside abuse decisions); nil serves an empty feed.
	Feed airlock.EventStore
	// Webhooks serves /v1/webhooks; nil answers 501 webhooks-disabled.
	Webhooks airlock.WebhookService
	Blobs    airlock.Blobs    // required
	Executor airlock.Executor // required
	// Ready reports whether the service can take work; nil means always
	// ready. /readyz shows the message of an *airlock.Error it returns
	// (give it code unavailable); any other error is logged and shown as
	// "not ready".
	Ready func(ctx context.Context) error
	// ReadyChecks are the dependencies /readyz checks one by one (the
	// store, runsc, the images, the blobs, etcd): one member each in
	// its body.
	ReadyChecks []ReadyCheck
	// MicroVM is the node's microVM acceleration ("kvm" or "tcg"), shown
	// by /readyz; empty without a microVM backend.
	MicroVM string
	// Metrics serves GET /metrics (Prometheus text format); nil answers
	// 404. It carries no tenant data, but it is not for everyone: see
	// MetricsKey and LoopbackOnly.
	Metrics http.Handler
	// MetricsKey, when set, is the bearer key GET /metrics requires
	// ("Authorization: Bearer <key>", compared in constant time; 401
	// otherwise). At least MinMetricsKeyBytes of printable ASCII without
	// spaces. Tenants' API keys do not open /metrics.
	MetricsKey string
	// LoopbackOnly says the server listens on loopback addresses only
	// (airlockd sets it from its --listen address). Without a MetricsKey,
	// /metrics is open then, and refused (403 metrics-key-required)
	// otherwise.
	LoopbackOnly bool
	// PublicURL, when set, is the absolute http or https URL clients reach
	// the API by, with an optional base path and no query or fragment
	// (e.g. https://airlock.example.com/base); artifact URLs are built
	// from it. Empty means from the request: its Host, and https only if
	// this server terminated TLS.
	PublicURL string
	// Sessions serves /v1/sessions and everything under it; nil answers
	// 501 sessions-disabled.
	Sessions airlock.SessionService
	// Keep serves snapshots, pause and resume, and fork; nil means
	// Sessions when it offers them too, else 501 keep-disabled.
	Keep airlock.KeepService
	// PTYs serves the terminals of sessions (pty.go); nil answers 501
	// ptys-disabled.
	PTYs airlock.PTYService
	// Volumes serves /v1/volumes; nil answers 501 volumes-disabled.
	Volumes airlock.VolumeService
	// EgressLog is where GET /v1/executions/{id}/egress reads the egress
	// audit log of one-shot runs; nil means Store, when it keeps the log
	// too (airlock.EgressStore, as sqlite.DB does), else every run's log
	// is empty.
	EgressLog airlock.EgressStore
	// Preview serves preview URLs (/v1/sessions/{id}/ports/...); nil
	// answers 501 preview-disabled.
	Preview airlock.PreviewService
	// Admin serves the admin API (/v1/admin/...); nil answers 501
	// admin-disabled.
	Admin AdminStore
	// Audit keeps the audit log of control-plane actions (keys, tenants,
	// grants); nil records none and GET /v1/admin/audit answers 501.
	Audit airlock.AuditStore
	// QuotaNames are the quotas PATCH /v1/admin/tenants/{name} may
	// override (package quota's keys); others are 400 unknown-quota.
	QuotaNames []string
	// Templates serves /v1/templates and /v1/admin/templates; nil answers
	// 501 templates-disabled.
	Templates airlock.TemplateService
	// Usage serves GET /v1/usage (the tenant's use of its quotas); nil
	// answers 501 usage-disabled.
	Usage airlock.UsageService
	// SigningKey signs artifact URLs (HMAC-SHA256); at least 32 bytes, and
	// the same on every node that serves the same blobs.
	SigningKey []byte
	// ArtifactURLTTL is how long a signed artifact URL is valid;
	// DefaultArtifactURLTTL if zero.
	ArtifactURLTTL time.Duration
	// StreamBufferBytes bounds the events of one event stream waiting for
	// a slow client; past it the stream is dropped (the program runs on).
	// DefaultStreamBufferBytes if zero.
	StreamBufferBytes int
	// StreamWriteTimeout bounds each write of an event stream; a write
	// that takes longer drops the stream. DefaultStreamWriteTimeout if
	// zero.
	StreamWriteTimeout time.Duration
	// UploadMinRate is the least a file upload must send, in bytes a
	// second on average over every UploadRateWindow, or it is cut off
	// (400 upload-too-slow); 8 KiB/s and 30 s if zero.
	UploadMinRate    int64
	UploadRateWindow time.Duration
	Logger           *slog.Logger     // slog.Default() if nil
	Now              func() time.Time // time.Now if nil
}

// Validate reports whether c can be used; zero durations, Logger and Now
// are defaults, not errors.
func (c Config) Validate() error {
	switch {
	case c.Store == nil:
		return airlock.Errorf(airlock.EINVALID, "httpapi: store is required")
	case c.Blobs == nil:
		return airlock.Errorf(airlock.EINVALID, "httpapi: blobs are required")
	case c.Executor == nil:
		return airlock.Errorf(airlock.EINVALID, "httpapi: executor is required")
	case len(c.SigningKey) < MinSigningKeyBytes:
		return airlock.Errorf(airlock.EINVALID, "httpapi: signing key must be at least %d bytes", MinSigningKeyBytes)
	case c.ArtifactURLTTL < 0:
		return airlock.Errorf(airlock.EINVALID, "httpapi: artifact URL TTL must not be negative")
	case c.StreamBufferBytes < 0:
		return airlock.Errorf(airlock.EINVALID, "httpapi: stream buffer must not be negative")
	case c.StreamWriteTimeout < 0:
		return airlock.Errorf(airlock.EINVALID, "httpapi: stream write timeout must not be negative")
	}
	if c.MetricsKey != "" {
		if err := ValidateMetricsKey(c.MetricsKey); err != nil {
			return err
		}
	}
	if c.PublicURL != "" {
		if _, err := ParsePublicURL(c.PublicURL); err != nil {
			return err
		}
	}
	return nil
}

// Server is the HTTP API. It is safe for concurrent use.
type Server struct {
	cfg        Config
	uploadRate upload.Rate
	log        *slog.Logger
	handler    http.Handler
	mux        *http.ServeMux
	publicBase string   // PublicURL without its trailing slash; "" if unset
	metricsSum [32]byte // SHA-256 of MetricsKey, if set
	auth       Authenticator
}

// New returns a server for cfg.
func New(cfg Config) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	rate := upload.Rate{MinBytesPerSec: cfg.UploadMinRate, Window: cfg.UploadRateWindow}
	if err := rate.Validate(); err != nil {
		return nil, airlock.Errorf(airlock.EINVALID, "httpapi: %v", err)
	}
	if cfg.ArtifactURLTTL == 0 {
		cfg.ArtifactURLTTL = DefaultArtifactURLTTL
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.StreamBufferBytes == 0 {
		cfg.StreamBufferBytes = DefaultStreamBufferBytes
	}
	if cfg.StreamWriteTimeout == 0 {
		cfg.StreamWriteTimeout = DefaultStreamWriteTimeout
	}
	cfg.SigningKey = append([]byte(nil), cfg.SigningKey...)
	s := &Server{cfg: cfg, log: cfg.Logger, auth: Authenticator{Keys: cfg.Store, Now: cfg.Now}, uploadRate: rate}
	if cfg.PublicURL != "" {
		u, _ := ParsePublicURL(cfg.PublicURL) // checked by Validate
		s.publicBase = u.Scheme + "://" + u.Host + strings.TrimRight(u.EscapedPath(), "/")
	}
	if cfg.MetricsKey != "" {
		s.metricsSum = sha256.Sum256([]byte(cfg.MetricsKey))
	}

	mux := http.NewServeMux()
	for _, rt := range routes {
		h := http.Handler(s.bind(rt.handle))
		if rt.auth != authNone {
			h = s.authenticate(h, rt.auth)
		}
		mux.Handle(rt.method+" "+rt.pattern, h)
	}
	s.mux = mux
	s.handler = s.logRequests(s.recoverPanics(s.problemForMux(mux)))
	return s, nil
}

// Route is the path pattern of the route r goes to, such as
// /v1/sessions/{id} (the OpenAPI document's path), or "" if none: a
// label for request metrics that IDs never become.
func (s *Server) Route(r *http.Request) string {
	_, pattern := s.mux.Handler(r)
	_, path, _ := strings.Cut(pattern, " ")
	return path
}

// Handler returns the root handler: every route, with logging, panic
// recovery and authentication.
func (s *Server) Handler() http.Handler { return s.handler }

func (s *Server) bind(f func(*Server, http.ResponseWriter, *http.Request)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) { f(s, w, r) }
}

// Request context: a mutable record the logger reads after the handler.

type ctxKey struct{}

type requestInfo struct {
	id        string
	tenant    *airlock.Tenant
	principal *airlock.Principal
}

func info(ctx context.Context) *requestInfo {
	ri, _ := ctx.Value(ctxKey{}).(*requestInfo)
	if ri == nil {
		return &requestInfo{}
	}
	return ri
}

// TenantFrom returns the tenant that authenticated the request, or nil.
func TenantFrom(ctx context.Context) *airlock.Tenant {
	return info(ctx).tenant
}

// statusWriter records the status and size of a response.
type statusWriter struct {
	http.ResponseWriter
	status int
	bytes  int64
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 && code >= 200 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	n, err := w.ResponseWriter.Write(b)
	w.bytes += int64(n)
	return n, err
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func newRequestID() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// logRequests gives each request an ID (X-Request-Id, and the instance of
// its problems) and logs one line per request. It logs the path, never the
// query: signed artifact URLs carry their token there.
func (s *Server) logRequests(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		ri := &requestInfo{id: newRequestID()}
		r = r.WithContext(context.WithValue(r.Context(), ctxKey{}, ri))
		w.Header().Set("X-Request-Id", ri.id)
		sw := &statusWriter{ResponseWriter: w}
		defer func() {
			tenant, key := "", ""
			if ri.tenant != nil {
				tenant = ri.tenant.ID
			}
			if ri.principal != nil {
				key = ri.principal.Key.ID
			}
			status := sw.status
			if status == 0 {
				status = http.StatusOK
			}
			s.log.LogAttrs(r.Context(), slog.LevelInfo, "http request",
				slog.String("request_id", ri.id),
				slog.String("method", r.Method),
				slog.String("path", r.URL.Path),
				slog.Int("status", status),
				slog.Int64("bytes", sw.bytes),
				slog.Duration("duration", time.Since(start)),
				slog.String("tenant", tenant),
				slog.String("key", key))
		}()
		next.ServeHTTP(sw, r)
	})
}

// recoverPanics turns a panic in a handler into a logged 500 problem (if
// nothing was written yet). http.ErrAbortHandler passes through.
func (s *Server) recoverPanics(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			v := recover()
			if v == nil {
				return
			}
			if v == http.ErrAbortHandler {
				panic(v)
			}
			s.log.LogAttrs(r.Context(), slog.LevelError, "panic in handler",
				slog.String("request_id", info(r.Context()).id),
				slog.String("method", r.Method),
				slog.String("path", r.URL.Path),
				slog.Any("panic", v),
				slog.String("stack", string(debug.Stack())))
			if sw, ok := w.(*statusWriter); ok && sw.status != 0 {
				panic(http.ErrAbortHandler) // too late for a problem: cut the response
			}
			s.writeProblem(w, r, newProblem(airlock.EINTERNAL, "", 0, "internal error"))
		}()
		next.ServeHTTP(w, r)
	})
}

// problemForMux replaces the mux's plain-text 404 and 405 responses with
// problems. Only requests no route matched are intercepted; the mux's
// redirects (path cleaning) pass through.
func (s *Server) problemForMux(mux *http.ServeMux) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h, pattern := mux.Handler(r)
		if pattern != "" {
			mux.ServeHTTP(w, r)
			return
		}
		h.ServeHTTP(&muxErrorWriter{ResponseWriter: w, s: s, r: r}, r)
	})
}

type muxErrorWriter struct {
	http.ResponseWriter
	s        *Server
	r        *http.Request
	replaced bool
}

func (w *muxErrorWriter) WriteHeader(code int) {
	switch code {
	case http.StatusNotFound:
		w.replaced = true
		w.s.writeProblem(w.ResponseWriter, w.r, newProblem(airlock.ENOTFOUND, "route-not-found", 0,
			fmt.Sprintf("no route for %s %s", w.r.Method, w.r.URL.Path)))
	case http.StatusMethodNotAllowed:
		w.replaced = true
		allow := w.Header().Get("Allow") // set by the mux
		w.s.writeProblem(w.ResponseWriter, w.r, newProblem(airlock.EINVALID, "method-not-allowed", code,
			fmt.Sprintf("%s is not allowed on %s; allowed: %s", w.r.Method, w.r.URL.Path, allow)))
	default:
		w.ResponseWriter.WriteHeader(code)
	}
}

func (w *muxErrorWriter) Write(b []byte) (int, error) {
	if w.replaced {
		return len(b), nil
	}
	return w.ResponseWriter.Write(b)
}

// Authentication.

// maxKeyBytes bounds a bearer key before it is hashed and looked up.
const maxKeyBytes = 512

func (s *Server) unauthorized(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="airlock"`)
	s.writeProblem(w, r, newProblem(airlock.EUNAUTHORIZED, "", 0, airlock.ErrUnauthorized.Message))
}

// Responses.

// error sends err as a problem, logging it in full if it is internal.
// An error that says when to retry (airlock.RetryAfterOf) sets the
// Retry-After header.
func (s *Server) error(w http.ResponseWriter, r *http.Request, err error) {
	if d := airlock.RetryAfterOf(err); d > 0 {
		w.Header().Set("Retry-After", RetryAfterSeconds(d))
	}
	p, internal := problemFor(err)
	if internal && r.Context().Err() != nil {
		// The client went away mid-request; nobody reads this answer.
		s.log.LogAttrs(r.Context(), slog.LevelInfo, "request canceled",
			slog.String("request_id", info(r.Context()).id),
			slog.String("path", r.URL.Path),
			slog.String("error", err.Error()))
	} else if internal {
		s.log.LogAttrs(r.Context(), slog.LevelError, "internal error",
			slog.String("request_id", info(r.Context()).id),
			slog.String("method", r.Method),
			slog.String("path", r.URL.Path),
			slog.String("error", err.Error()))
	} else if p.Status >= 500 {
		s.log.LogAttrs(r.Context(), slog.LevelWarn, "server error",
			slog.String("request_id", info(r.Context()).id),
			slog.String("path", r.URL.Path),
			slog.String("error", err.Error()))
	}
	s.writeProblem(w, r, p)
}

// writeProblem sends p, with the request's ID as its instance.
func (s *Server) writeProblem(w http.ResponseWriter, r *http.Request, p *Problem) {
	if id := info(r.Context()).id; id != "" && p.Instance == "" {
		p.Instance = "urn:airlock:request:" + id
	}
	if err := problem.Write(w, p); err != nil {
		s.log.Error("problem extension does not encode", "err", err)
	}
}

// writeJSON sends v with the status.
func (s *Server) writeJSON(w http.ResponseWriter, r *http.Request, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		s.error(w, r, fmt.Errorf("encode response: %w", err))
		return
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	w.Write(append(body, '\n'))
}

// errorf is shorthand for a client error with a problem type.
func errorf(code, typ, format string, args ...any) error {
	return airlock.Problem(code, typ, format, args...)
}
