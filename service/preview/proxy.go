package preview

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/agent/protocol"
	"github.com/airlockhq/airlock/internal/problem"
)

// Where a request may carry a token, and the cookie a query token is
// exchanged for.
const (
	HeaderToken = "X-Airlock-Preview-Token"
	QueryToken  = "airlock_token"
	CookieToken = "airlock_preview"
)

// request is one preview request, carried to the proxy's hooks in the
// context.
type request struct {
	sid    string
	port   int
	path   string // what the server in the sandbox is asked for
	prefix string // the path-form prefix, "" for the Host form
	up     *counter
	down   *counter
	st     *sessionState
	err    error
	cut    atomic.Bool // the session ended under the request
}

type requestKey struct{}

// dialHost is the name a port's connections are pooled under.
func dialHost(sid string, port int) string {
	return "p" + strconv.Itoa(port) + "." + sid + ".sandbox"
}

func parseDialHost(addr string) (string, int, bool) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, false
	}
	p, rest, ok := strings.Cut(strings.TrimPrefix(host, "p"), ".")
	if !ok {
		return "", 0, false
	}
	sid, ok := strings.CutSuffix(rest, ".sandbox")
	port, pok := ParsePort(p)
	return sid, port, ok && pok && ValidSessionID(sid)
}

// newProxy makes the transport (connections to a port of a session are
// dialed through its agent, and pooled by session and port) and the
// reverse proxy over it.
func (s *Service) newProxy() (*http.Transport, http.Handler) {
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) {
			sid, port, ok := parseDialHost(addr)
			if !ok {
				return nil, fmt.Errorf("preview: bad dial address %q", addr)
			}
			// The request was admitted; the session is looked up again
			// (it may have ended since).
			t, err := s.cfg.Targets.PreviewTarget(ctx, nil, sid)
			if err != nil {
				return nil, err
			}
			c, err := t.Dial(ctx, port)
			if err != nil {
				return nil, err
			}
			return &meteredConn{Conn: c, s: s, st: s.state(t)}, nil
		},
		MaxIdleConnsPerHost:   8,
		IdleConnTimeout:       30 * time.Second,
		ResponseHeaderTimeout: 0, // a server may think for as long as it likes
		DisableCompression:    true,
	}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			rq := pr.In.Context().Value(requestKey{}).(*request)
			pr.Out.URL.Scheme = "http"
			pr.Out.URL.Host = dialHost(rq.sid, rq.port)
			pr.Out.URL.Path = rq.path
			pr.Out.URL.RawPath = ""
			pr.Out.Host = pr.In.Host // the app sees the Host it was asked by
			pr.SetXForwarded()
			if rq.prefix != "" {
				pr.Out.Header.Set("X-Forwarded-Prefix", rq.prefix)
			}
			strip(pr.Out)
			if s.cfg.SandboxTokens != nil {
				pr.Out.Header.Del(s.cfg.SandboxTokens.TokenHeader())
			}
		},
		Transport:     tr,
		FlushInterval: -1, // event streams and long bodies go out as they come
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			rq := r.Context().Value(requestKey{}).(*request)
			rq.err = err
			var re *protocol.RemoteError
			switch {
			case rq.cut.Load():
				writeProblem(w, airlock.Problem(airlock.ECONFLICT, "session-ended",
					"session %s ended while this preview request was open", rq.sid))
			case r.Context().Err() != nil:
				return // the client went away
			case errors.As(err, &re) && re.Code == "refused":
				writeProblem(w, airlock.Problem(airlock.EUNAVAILABLE, "preview-port-closed",
					"nothing listens on port %d in session %s", rq.port, rq.sid).RetryLater(time.Second))
			case errors.Is(err, errBytesExhausted):
				writeProblem(w, bytesProblem(rq.sid))
			case airlock.ErrorCode(err) != "" && airlock.ErrorCode(err) != airlock.EINTERNAL:
				writeProblem(w, err)
			default:
				writeProblem(w, airlock.Problem(airlock.EUNAVAILABLE, "preview-upstream-failed",
					"the server on port %d in session %s did not answer", rq.port, rq.sid))
			}
		},
	}
	return tr, rp
}

// strip removes the credentials meant for Airlock from a request that
// goes to the sandbox: the API key, the token (header, query) and the
// token's cookie.
func strip(out *http.Request) {
	out.Header.Del("Authorization")
	out.Header.Del("X-Api-Key")
	out.Header.Del(HeaderToken)
	if q := out.URL.Query(); q.Has(QueryToken) {
		q.Del(QueryToken)
		out.URL.RawQuery = q.Encode()
	}
	if cs := out.Cookies(); len(cs) > 0 {
		out.Header.Del("Cookie")
		var keep []string
		for _, c := range cs {
			if c.Name != CookieToken {
				keep = append(keep, c.Name+"="+c.Value)
			}
		}
		if len(keep) > 0 {
			out.Header.Set("Cookie", strings.Join(keep, "; "))
		}
	}
}

// ServePreview serves the path form: /v1/sessions/{id}/ports/{port}/{path}.
func (s *Service) ServePreview(w http.ResponseWriter, r *http.Request, tenant *airlock.Tenant, sid string, port int, path string) {
	s.serve(w, r, tenant, sid, port, path, PathPrefix(sid, port))
}

// Wrap puts Host routing in front of next: a request whose Host is
// under the preview domain is a preview ({port}-{session_id}.{domain}
// exactly, anything else under the domain 404), never the API. Without
// a domain, next is returned as it is.
func (s *Service) Wrap(next http.Handler) http.Handler {
	if s.cfg.Domain == "" {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		port, sid, under, err := ParseHost(r.Host, s.cfg.Domain)
		if !under {
			next.ServeHTTP(w, r)
			return
		}
		if err != nil {
			writeProblem(w, airlock.Problem(airlock.ENOTFOUND, "preview-host-invalid",
				"this host is under the preview domain but names no port of a session: use {port}-{session_id}.%s", s.cfg.Domain))
			return
		}
		// The request line must be a path: an absolute URI naming
		// another host is refused rather than trusted.
		if r.URL.IsAbs() && !strings.EqualFold(r.URL.Host, r.Host) || !strings.HasPrefix(r.URL.Path, "/") && r.URL.Path != "" {
			writeProblem(w, airlock.Problem(airlock.EINVALID, "preview-host-invalid", "the request target must be a path"))
			return
		}
		var tenant *airlock.Tenant
		if r.Header.Get("Authorization") != "" {
			tenant, err = s.authenticate(r)
			if err != nil {
				w.Header().Set("WWW-Authenticate", `Bearer realm="airlock"`)
				writeProblem(w, err)
				return
			}
		}
		p := r.URL.Path
		if p == "" {
			p = "/"
		}
		s.serve(w, r, tenant, sid, port, p, "")
	})
}

// authenticate resolves a bearer key, as every route does.
func (s *Service) authenticate(r *http.Request) (*airlock.Tenant, error) {
	key, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	key = strings.TrimSpace(key)
	if !ok || key == "" || len(key) > 512 {
		return nil, airlock.ErrUnauthorized
	}
	p, err := airlock.Authenticate(r.Context(), s.cfg.Keys, key, s.cfg.Now())
	if err != nil {
		return nil, err
	}
	if p.Tenant == nil {
		return nil, airlock.Problem(airlock.EFORBIDDEN, "tenant-key-required", "an operator key opens no session's port; use the tenant's key")
	}
	return p.Tenant, nil
}

// serve admits a request (key, token or public port), applies the
// session's limits, and proxies it to the port.
func (s *Service) serve(w http.ResponseWriter, r *http.Request, tenant *airlock.Tenant, sid string, port int, path, prefix string) {
	start := s.cfg.Now()
	if err := checkPort(port); err != nil {
		writeProblem(w, err)
		return
	}
	if !ValidSessionID(sid) {
		writeProblem(w, airlock.Problem(airlock.ENOTFOUND, "session-not-found", "no session %s", cutID(sid)))
		return
	}
	// A token in the query is exchanged for a cookie of this host (and,
	// in the path form, this port's path) and the client sent on to the
	// URL without it, so it leaves no trace in links and history.
	if q := r.URL.Query(); q.Has(QueryToken) {
		tok := q.Get(QueryToken)
		if !s.tokenValid(tok, sid, port) {
			unauthorized(w, "the preview token is not valid for this port: expired, revoked, or for another session or port")
			return
		}
		cookiePath := "/"
		if prefix != "" {
			cookiePath = prefix + "/"
		}
		http.SetCookie(w, &http.Cookie{Name: CookieToken, Value: tok, Path: cookiePath, HttpOnly: true,
			Secure: r.TLS != nil, SameSite: http.SameSiteLaxMode})
		q.Del(QueryToken)
		u := url.URL{Path: r.URL.Path, RawPath: r.URL.RawPath, RawQuery: q.Encode()}
		code := http.StatusFound
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			code = http.StatusTemporaryRedirect
		}
		w.Header().Set("Cache-Control", "no-store")
		http.Redirect(w, r, u.RequestURI(), code)
		return
	}
	how := ""
	var err error
	switch {
	case tenant != nil:
		how = "key"
	case s.sandboxToken(r) != "":
		how = "sandbox-token"
		if tenant, err = s.cfg.SandboxTokens.TokenTenant(r.Context(), sid, s.sandboxToken(r)); err != nil {
			if airlock.ErrorCode(err) == airlock.EUNAUTHORIZED {
				unauthorized(w, "the sandbox's access token ("+s.cfg.SandboxTokens.TokenHeader()+") is not valid for this session, or the key it was issued to was revoked")
			} else {
				writeProblem(w, err)
			}
			return
		}
	case s.tokenValid(r.Header.Get(HeaderToken), sid, port):
		how = "token"
	case s.cookieValid(r, sid, port):
		how = "cookie"
	case s.isPublic(sid, port):
		how = "public"
	default:
		if r.Header.Get(HeaderToken) != "" {
			unauthorized(w, "the preview token is not valid for this port: expired, revoked, or for another session or port")
		} else {
			unauthorized(w, "this port is private: send the tenant's API key (Authorization: Bearer), a preview token ("+HeaderToken+" or ?"+QueryToken+"=), or make the port public")
		}
		return
	}
	if tenant == nil {
		// Admitted by a token, its cookie or a public port: the session's
		// owner is whom the session is looked up (and resumed) for.
		tenant, err = s.tenantOf(r.Context(), sid)
	}
	var t *airlock.PreviewTarget
	if err == nil {
		// A paused session whose lifecycle has auto_resume is resumed
		// here (the request waits for it); without it, session-paused.
		t, err = s.cfg.Targets.PreviewTarget(r.Context(), tenant, sid)
	}
	if err != nil {
		writeProblem(w, err)
		return
	}
	st := s.state(t)
	rq := &request{sid: sid, port: port, path: path, prefix: prefix, up: &counter{}, down: &counter{}, st: st}
	if err := s.admit(st, sid); err != nil {
		writeProblem(w, err)
		s.record(t, r, rq, start, http.StatusTooManyRequests, how, airlock.VerdictDenied)
		return
	}
	defer s.leave(st)
	// The server's timeouts are for API calls: a preview may stream, or
	// hold a WebSocket, for as long as the session lives.
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Time{})
	_ = rc.SetWriteDeadline(time.Time{})
	if r.Body != nil && r.Body != http.NoBody {
		r.Body = &countingBody{ReadCloser: r.Body, n: rq.up}
	}
	mw := &meterWriter{ResponseWriter: w, n: rq.down, up: rq.up}
	ctx := context.WithValue(r.Context(), requestKey{}, rq)
	// The session's end cuts its previews.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if t.Ended != nil {
		go func() {
			select {
			case <-t.Ended:
				rq.cut.Store(true)
				cancel()
			case <-ctx.Done():
			}
		}()
	}
	// Recorded even when the proxy aborts a response half sent.
	defer func() {
		verdict := airlock.VerdictAllowed
		v := recover()
		if v == http.ErrAbortHandler && rq.err == nil {
			// Cut off after the answer began (the app closed mid-body,
			// the session ended, the bytes ran out): nothing more can be
			// said to the client than an incomplete body.
			rq.err = errors.New("cut off mid-response")
		}
		if rq.err != nil {
			verdict = airlock.VerdictFailed
		}
		s.record(t, r, rq, start, mw.statusCode(), how, verdict)
		if v != nil {
			panic(v)
		}
	}()
	s.rp.ServeHTTP(mw, r.WithContext(ctx))
}

// sandboxToken is the request's sandbox-wide access token, if the node
// takes them.
func (s *Service) sandboxToken(r *http.Request) string {
	if s.cfg.SandboxTokens == nil {
		return ""
	}
	return r.Header.Get(s.cfg.SandboxTokens.TokenHeader())
}

// tenantOf is the owner of a session this node has admitted previews
// to (by a token or a public port, which only its owner can set up).
func (s *Service) tenantOf(ctx context.Context, sid string) (*airlock.Tenant, error) {
	s.mu.Lock()
	st := s.sessions[sid]
	s.mu.Unlock()
	if st == nil {
		return nil, airlock.Problem(airlock.ENOTFOUND, "session-not-found", "no session %s", sid)
	}
	t, err := s.cfg.Keys.TenantByID(ctx, st.tenantID)
	if airlock.ErrorCode(err) == airlock.ENOTFOUND {
		return nil, airlock.Problem(airlock.ENOTFOUND, "session-not-found", "no session %s", sid)
	}
	return t, err
}

// cookieValid reports whether the request's preview cookie opens the port.
func (s *Service) cookieValid(r *http.Request, sid string, port int) bool {
	for _, c := range r.Cookies() {
		if c.Name == CookieToken && s.tokenValid(c.Value, sid, port) {
			return true
		}
	}
	return false
}

// admit takes one of the session's connections, if its limits allow.
func (s *Service) admit(st *sessionState, sid string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cfg.MaxBytes > 0 && st.bytes >= s.cfg.MaxBytes {
		return bytesProblem(sid)
	}
	if st.conns >= s.cfg.MaxConns {
		return airlock.Problem(airlock.ERATELIMITED, "preview-too-many-connections",
			"session %s has %d preview requests open, the most it takes at once; retry when one has finished", sid, s.cfg.MaxConns).RetryLater(time.Second)
	}
	st.conns++
	return nil
}

func (s *Service) leave(st *sessionState) {
	s.mu.Lock()
	st.conns--
	s.mu.Unlock()
}

func bytesProblem(sid string) error {
	return airlock.Problem(airlock.ERATELIMITED, "preview-bytes-exhausted",
		"session %s's previews have carried the most bytes a session may", sid)
}

var errBytesExhausted = errors.New("preview: the session's preview bytes are used up")

func unauthorized(w http.ResponseWriter, msg string) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="airlock"`)
	writeProblem(w, airlock.Problem(airlock.EUNAUTHORIZED, "preview-unauthorized", "%s", msg))
}

func writeProblem(w http.ResponseWriter, err error) {
	problem.WriteError(w, err)
}

// counter counts bytes; read after the request.
type counter struct{ n atomic.Int64 }

type countingBody struct {
	io.ReadCloser
	n *counter
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n.n.Add(int64(n))
	return n, err
}

// meterWriter counts what goes to the client, and wraps a hijacked
// connection (a WebSocket) so its bytes are counted too.
type meterWriter struct {
	http.ResponseWriter
	n, up  *counter
	status int
}

func (m *meterWriter) statusCode() int {
	if m.status == 0 {
		return http.StatusOK
	}
	return m.status
}

func (m *meterWriter) WriteHeader(code int) {
	if m.status == 0 && code >= 200 || code == http.StatusSwitchingProtocols {
		m.status = code
	}
	m.ResponseWriter.WriteHeader(code)
}

func (m *meterWriter) Write(b []byte) (int, error) {
	if m.status == 0 {
		m.status = http.StatusOK
	}
	n, err := m.ResponseWriter.Write(b)
	m.n.n.Add(int64(n))
	return n, err
}

func (m *meterWriter) Flush() {
	_ = http.NewResponseController(m.ResponseWriter).Flush()
}

func (m *meterWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c, brw, err := http.NewResponseController(m.ResponseWriter).Hijack()
	if err != nil {
		return nil, nil, err
	}
	if m.status == 0 {
		m.status = http.StatusSwitchingProtocols
	}
	return &countedConn{Conn: c, in: m.up, out: m.n}, brw, nil
}

func (m *meterWriter) Unwrap() http.ResponseWriter { return m.ResponseWriter }

// countedConn counts a hijacked client connection's bytes.
type countedConn struct {
	net.Conn
	in, out *counter
}

func (c *countedConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.in.n.Add(int64(n))
	return n, err
}

func (c *countedConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	c.out.n.Add(int64(n))
	return n, err
}

// meteredConn is a connection to a port: its bytes count against the
// session's limit, and it fails once that is used up.
type meteredConn struct {
	net.Conn
	s  *Service
	st *sessionState
}

func (c *meteredConn) add(n int) error {
	if n == 0 {
		return nil
	}
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	c.st.bytes += int64(n)
	if c.s.cfg.MaxBytes > 0 && c.st.bytes > c.s.cfg.MaxBytes {
		return errBytesExhausted
	}
	return nil
}

func (c *meteredConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if aerr := c.add(n); aerr != nil && err == nil {
		c.Conn.Close()
		return n, aerr
	}
	return n, err
}

func (c *meteredConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	if aerr := c.add(n); aerr != nil && err == nil {
		c.Conn.Close()
		return n, aerr
	}
	return n, err
}

// CloseWrite passes a half close on (ReverseProxy's upgraded copies use
// it).
func (c *meteredConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}
