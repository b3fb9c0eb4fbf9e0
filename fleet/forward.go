package fleet

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/problem"
)

// Headers between nodes, and the one every answer of a fleet carries.
const (
	// HeaderReservation names the reservation a forwarded creation was
	// placed with (signed with the forward).
	HeaderReservation = "X-Airlock-Fleet-Reservation"
	// HeaderBound, on a forward's answer, says the node bound the
	// forward's reservation to the session it made; the placer frees
	// every other reservation. Never passed on to clients.
	HeaderBound = "X-Airlock-Fleet-Bound"
	// HeaderNode names the node that served the request.
	HeaderNode = "X-Airlock-Node"
)

// Problem types of the front.
const (
	ProblemUnauthenticated = "unauthenticated"       // no or a wrong key: before any placement
	ProblemForwardRefused  = "fleet-forward-refused" // a forward's signature failed
)

// E2B's header naming the sandbox of a data-plane request.
const headerE2BSandbox = "E2b-Sandbox-Id"

// placeWait bounds how long a placement waits for etcd to answer (a
// leader election takes about a second).
const placeWait = 15 * time.Second

// maxForwardTries bounds the nodes one placed request is forwarded to
// when the chosen ones cannot be reached.
const maxForwardTries = 3

// Handler routes every request of the API: new runs and sessions are
// placed and forwarded to their node, requests for a session go to the
// node that holds it, everything else (records, lists, artifacts, all
// in the shared store) is served by local.
func (f *Fleet) Handler(local http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if isForward(r) {
			alloc, err := f.verify(r)
			if err != nil {
				f.log.Warn("fleet: refused a forwarded request", "from", r.RemoteAddr, "path", r.URL.Path, "err", err)
				f.problem(w, airlock.Problem(airlock.EUNAUTHORIZED, ProblemForwardRefused, "the forwarded request is not authentic"))
				return
			}
			f.serveLocal(w, r, local, alloc, true)
			return
		}
		if sid, ok := f.previewHost(r); ok {
			// A preview's key, token or public port is checked by the
			// node holding the session.
			f.serveOwned(w, r, local, sid)
			return
		}
		kind, sid := classify(r)
		vol := volumeDeleted(r)
		tenant := ""
		if (kind != "" || sid != "" || vol != "") && r.Header.Get(headerE2BSandbox) == "" && !isPreviewPath(r) {
			// Who asks, before anything is placed or looked up in etcd.
			// (An E2B sandbox's data-plane requests carry its access
			// token, which only the node holding it can check.)
			var ok bool
			if tenant, ok = f.authenticate(w, r); !ok {
				return
			}
		}
		switch {
		case kind != "":
			f.servePlaced(w, r, local, kind, tenant)
		case vol != "":
			f.serveVolume(w, r, local, tenant, vol)
		case sid != "":
			f.serveOwned(w, r, local, sid)
		default:
			f.serveLocal(w, r, local, "", false)
		}
	})
}

// previewHost reads a preview URL's Host, if the node serves them.
func (f *Fleet) previewHost(r *http.Request) (string, bool) {
	if f.cfg.PreviewHost == nil {
		return "", false
	}
	return f.cfg.PreviewHost(r.Host)
}

// isPreviewPath reports whether r is for a session's port through the
// path form, /v1/sessions/{id}/ports/{port}/{path...}, other than the
// token routes (POST and DELETE .../token, which need the key).
func isPreviewPath(r *http.Request) bool {
	rest, ok := strings.CutPrefix(r.URL.Path, "/v1/sessions/")
	if !ok {
		return false
	}
	parts := strings.SplitN(rest, "/", 4) // id, "ports", port, path
	if len(parts) < 4 || parts[1] != "ports" {
		return false
	}
	if parts[3] == "token" && (r.Method == http.MethodPost || r.Method == http.MethodDelete) {
		return false
	}
	return true
}

// authenticate answers a request no tenant's key vouches for with a
// problem that says no more than that; it returns the tenant and whether
// the request may go on.
func (f *Fleet) authenticate(w http.ResponseWriter, r *http.Request) (string, bool) {
	tenant, err := f.cfg.Auth.Authenticate(r)
	if err == nil {
		return tenant, true
	}
	switch airlock.ErrorCode(err) {
	case airlock.EUNAUTHORIZED, airlock.ENOTFOUND:
		w.Header().Set("WWW-Authenticate", `Bearer realm="airlock"`)
		f.problem(w, airlock.Problem(airlock.EUNAUTHORIZED, ProblemUnauthenticated, "a valid API key is required"))
	default:
		f.log.Error("fleet: authenticating a request", "path", r.URL.Path, "err", err)
		f.problem(w, airlock.Problem(airlock.EUNAVAILABLE, "unavailable", "the request could not be authenticated now").RetryLater(time.Second))
	}
	return "", false
}

// classify says whether a request is placed (and as what), or is for a
// session (and which).
func classify(r *http.Request) (Kind, string) {
	p := r.URL.Path
	if r.Method == http.MethodPost {
		switch p {
		case "/v1/execute", "/v1/sandbox/execute":
			return KindRun, ""
		case "/v1/sessions", "/sandboxes", "/v2/sandboxes":
			return KindSession, ""
		}
	}
	if id := r.Header.Get(headerE2BSandbox); id != "" {
		return "", id
	}
	for _, pre := range []string{"/v1/sessions/", "/sandboxes/", "/v2/sandboxes/"} {
		if rest, ok := strings.CutPrefix(p, pre); ok {
			id, _, _ := strings.Cut(rest, "/")
			return "", id
		}
	}
	return "", ""
}

// placeBody is what placement reads of a request body (native and E2B).
type placeBody struct {
	Image      string `json:"image"`
	Template   string `json:"template"`
	TemplateID string `json:"templateID"`
	Language   string `json:"language"`
	Size       string `json:"size"`
	Isolation  string `json:"isolation"`
	Volumes    []struct {
		Name string `json:"name"`
	} `json:"volumes"`
}

func (f *Fleet) servePlaced(w http.ResponseWriter, r *http.Request, local http.Handler, kind Kind, tenant string) {
	body, err := io.ReadAll(io.LimitReader(r.Body, MaxPlacedBodyBytes+1))
	if err != nil {
		f.problem(w, airlock.Errorf(airlock.EINVALID, "reading the request body: %v", err))
		return
	}
	if len(body) > MaxPlacedBodyBytes {
		f.problem(w, airlock.Problem(airlock.ETOOLARGE, "body-too-large", "the request body is larger than %d bytes", MaxPlacedBodyBytes))
		return
	}
	var pb placeBody
	if json.Unmarshal(body, &pb) != nil {
		// Not JSON: the local handler answers with the right problem.
		r.Body = io.NopCloser(bytes.NewReader(body))
		f.serveLocal(w, r, local, "", false)
		return
	}
	req := Request{Kind: kind, Image: pb.Image, Language: pb.Language, Size: pb.Size, Isolation: pb.Isolation}
	if req.Image == "" {
		req.Image = pb.TemplateID
	}
	if err := f.affinity(r.Context(), tenant, pb, &req); err != nil {
		f.problem(w, err)
		return
	}
	skip := map[string]bool{}
	for try := 0; ; try++ {
		res, n, err := f.placeRetry(r.Context(), req, skip)
		if err != nil {
			f.problem(w, err)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
		// The reservation stays only with a new session bound to it
		// (not with a run, a refusal or an idempotent replay).
		if n.ID == f.cfg.NodeID {
			if !f.serveLocal(w, r, local, res.ID, false) {
				f.release(r.Context(), res)
			}
			return
		}
		status, bound, err := f.forward(w, r, n, res.ID)
		if !bound {
			f.release(r.Context(), res)
		}
		if err == nil || status != 0 {
			return
		}
		skip[n.ID] = true
		f.log.Warn("fleet: a node did not take a forwarded request; placing it again", "node", n.ID, "err", err)
		if try+1 >= maxForwardTries || r.Context().Err() != nil {
			f.problem(w, airlock.Problem(airlock.EUNAVAILABLE, "fleet-node-unreachable",
				"the nodes chosen for this request could not be reached").RetryLater(2*time.Second))
			return
		}
	}
}

// placeRetry is place, waiting out a while when etcd does not answer
// (a leader election) instead of failing the request.
func (f *Fleet) placeRetry(ctx context.Context, req Request, skip map[string]bool) (*Reservation, Node, error) {
	deadline := time.Now().Add(placeWait)
	wait := 20 * time.Millisecond
	for {
		// One round may take what is left of the wait: on a loaded
		// machine a contended node's reads and transactions are slow.
		pctx, cancel := context.WithDeadline(ctx, deadline)
		res, n, err := f.place(pctx, req, skip)
		cancel()
		var e *airlock.Error
		// A run that finds every slot taken waits for one, as a node's
		// own admission queues runs; a full fleet of sessions is an
		// answer at once (their slots are held for minutes).
		again := errors.As(err, &e) && (e.Type == problemEtcd || e.Type == problemBusy || (e.Type == ProblemFull && req.Kind == KindRun))
		if err == nil || !again || time.Now().After(deadline) || ctx.Err() != nil {
			return res, n, err
		}
		select {
		case <-ctx.Done():
			return nil, Node{}, err
		case <-f.allocs.changed: // a reservation came or went
		case <-time.After(wait):
		}
		wait = min(2*wait, 500*time.Millisecond)
	}
}

func (f *Fleet) serveOwned(w http.ResponseWriter, r *http.Request, local http.Handler, sid string) {
	owner, ok := f.Owner(r.Context(), sid)
	if !ok || owner == f.cfg.NodeID {
		f.serveLocal(w, r, local, "", false)
		return
	}
	n, ok := f.member(owner)
	if !ok {
		// Its node is gone: the shared store says what became of it.
		f.serveLocal(w, r, local, "", false)
		return
	}
	if status, _, err := f.forward(w, r, n, ""); err != nil && status == 0 {
		f.problem(w, airlock.Problem(airlock.EUNAVAILABLE, "session-node-unreachable",
			"the node holding session %s cannot be reached now", sid).RetryLater(2*time.Second))
	}
}

// serveLocal serves a request here. A session made here is mapped to this
// node before its answer goes out (so the next request, through any node,
// finds it); a session deleted here is unmapped. It reports whether a
// new session was made with alloc (and, to a forwarding node, says so in
// HeaderBound).
func (f *Fleet) serveLocal(w http.ResponseWriter, r *http.Request, local http.Handler, alloc string, forwarded bool) bool {
	w.Header().Set(HeaderNode, f.cfg.NodeID)
	creates := r.Method == http.MethodPost && (r.URL.Path == "/v1/sessions" || r.URL.Path == "/sandboxes" ||
		r.URL.Path == "/v2/sandboxes" || (strings.HasPrefix(r.URL.Path, "/v1/sessions/") && strings.HasSuffix(r.URL.Path, "/fork")))
	if !creates {
		sw := &statusWriter{ResponseWriter: w}
		local.ServeHTTP(sw, r)
		if r.Method == http.MethodDelete && sw.status/100 == 2 {
			if _, sid := classify(r); sid != "" && !strings.Contains(strings.TrimPrefix(r.URL.Path, "/v1/sessions/"), "/") {
				f.dropLocal(r.Context(), sid)
			}
		}
		return false
	}
	if alloc != "" {
		f.mu.Lock()
		f.inflight[alloc] = true
		f.mu.Unlock()
		defer func() {
			f.mu.Lock()
			delete(f.inflight, alloc)
			f.mu.Unlock()
		}()
	}
	buf := &bufferWriter{header: http.Header{}}
	local.ServeHTTP(buf, r)
	made := false
	// Only a new session (201) takes the reservation: an idempotent
	// replay (200) names a session that has its mapping and reservation
	// already.
	if buf.status == http.StatusCreated && buf.header.Get("Idempotent-Replayed") == "" {
		for i, id := range createdIDs(buf.body.Bytes()) {
			a := ""
			if i == 0 {
				a = alloc
				made = alloc != ""
			}
			if a == "" {
				a = f.selfReserve(r.Context(), KindSession)
			}
			// The session holds its reservation even when its mapping
			// could not be written now (the sweep keeps an unbound
			// reservation for PendingTTL).
			if err := f.bind(r.Context(), id, a); err != nil {
				f.log.Error("fleet: mapping a new session to this node", "session", id, "err", err)
			}
		}
	}
	for k, v := range buf.header {
		w.Header()[k] = v
	}
	w.Header().Del(HeaderBound)
	if made && forwarded {
		w.Header().Set(HeaderBound, alloc)
	}
	if buf.status == 0 {
		buf.status = http.StatusOK
	}
	w.WriteHeader(buf.status)
	_, _ = w.Write(buf.body.Bytes())
	return made
}

// selfReserve takes a session's share on this node for a session that
// came without a placement (a fork's children): best effort, as the
// session exists already.
func (f *Fleet) selfReserve(ctx context.Context, kind Kind) string {
	d, err := f.cfg.Demand(Request{Kind: kind})
	if err != nil {
		return ""
	}
	res, err := f.reserve(ctx, f.Self(), kind, d)
	if err != nil {
		f.log.Warn("fleet: a session made without a placement has no reservation", "err", err)
		return ""
	}
	return res.ID
}

// dropLocal unmaps a session this node deleted.
func (f *Fleet) dropLocal(ctx context.Context, sid string) {
	v, ok := f.sessions.get(f.cfg.sessionKey(sid))
	if !ok {
		return
	}
	var b binding
	if json.Unmarshal(v, &b) == nil && b.Node == f.cfg.NodeID {
		f.unbind(ctx, sid, b)
	}
}

// createdIDs returns the session IDs an answer made: a session
// ("session_id"), an E2B sandbox ("sandboxID") or a fork ("sessions":
// [{"session_id"}]).
func createdIDs(body []byte) []string {
	var v struct {
		ID        string `json:"session_id"`
		SandboxID string `json:"sandboxID"`
		Sessions  []struct {
			ID string `json:"session_id"`
		} `json:"sessions"`
	}
	if json.Unmarshal(body, &v) != nil {
		return nil
	}
	var out []string
	for _, s := range []string{v.ID, v.SandboxID} {
		if s != "" {
			out = append(out, s)
			break
		}
	}
	for _, s := range v.Sessions {
		if s.ID != "" {
			out = append(out, s.ID)
		}
	}
	return out
}

// hop is one forward, carried to the proxy's hooks in the context.
type hop struct {
	target *url.URL
	alloc  string
	sig    http.Header
	stream func(*http.Request)
	bound  bool
	err    error
}

type hopKey struct{}

// forward reverse-proxies r to node n, signed, streaming both ways
// (event streams are flushed as they come). It returns the status the
// node answered, or 0 and the error when no answer began, and whether
// the node bound alloc to a session it made.
func (f *Fleet) forward(w http.ResponseWriter, r *http.Request, n Node, alloc string) (int, bool, error) {
	target, err := url.Parse(n.Addr)
	if err != nil {
		return 0, false, err
	}
	sig, stream, err := f.sign(r, n.ID, alloc)
	if err != nil {
		return 0, false, err
	}
	h := &hop{target: target, alloc: alloc, sig: sig, stream: stream}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			h := pr.In.Context().Value(hopKey{}).(*hop)
			pr.SetURL(h.target)
			if _, ok := f.previewHost(pr.In); ok {
				pr.Out.Host = pr.In.Host // the holder routes a preview by its Host
			}
			pr.SetXForwarded()
			for k, v := range h.sig {
				pr.Out.Header[k] = v
			}
			if h.stream != nil {
				h.stream(pr.Out)
			}
		},
		ModifyResponse: func(resp *http.Response) error {
			h := resp.Request.Context().Value(hopKey{}).(*hop)
			h.bound = h.alloc != "" && resp.Header.Get(HeaderBound) == h.alloc
			resp.Header.Del(HeaderBound)
			return nil
		},
		Transport:     f.transport,
		FlushInterval: -1,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			r.Context().Value(hopKey{}).(*hop).err = err
		},
	}
	sw := &statusWriter{ResponseWriter: w}
	rp.ServeHTTP(sw, r.WithContext(context.WithValue(r.Context(), hopKey{}, h)))
	if h.err != nil && sw.status == 0 {
		return 0, false, h.err
	}
	return sw.status, h.bound, h.err
}

// problem writes err as an RFC 9457 problem, saying which node answered.
func (f *Fleet) problem(w http.ResponseWriter, err error) {
	w.Header().Set(HeaderNode, f.cfg.NodeID)
	if problem.WriteError(w, err) {
		f.log.Error("fleet: request failed", "err", err)
	}
}

// statusWriter remembers the status written through it; it passes
// flushes, hijacks and deadlines on (event streams need them).
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (s *statusWriter) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

func (s *statusWriter) Flush() {
	if fl, ok := s.ResponseWriter.(http.Flusher); ok {
		fl.Flush()
	}
}

func (s *statusWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	return http.NewResponseController(s.ResponseWriter).Hijack()
}

func (s *statusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// bufferWriter holds a whole (small, JSON) answer until the fleet has
// recorded what it made.
type bufferWriter struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (b *bufferWriter) Header() http.Header { return b.header }
func (b *bufferWriter) WriteHeader(code int) {
	if b.status == 0 {
		b.status = code
	}
}
func (b *bufferWriter) Write(p []byte) (int, error) {
	if b.status == 0 {
		b.status = http.StatusOK
	}
	return b.body.Write(p)
}
