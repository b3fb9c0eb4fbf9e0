package e2b

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"

	"github.com/airlockhq/airlock"
)

// The data plane: calls into one sandbox, named by E2b-Sandbox-Id and
// opened by its token.

// sandboxRef is a sandbox the data plane serves: its tenant and record.
type sandboxRef struct {
	id     string
	tenant *airlock.Tenant

	mu   sync.Mutex
	rec  *airlock.E2BSandbox
	runs map[string]int    // cells run, by context (E2B's execution count)
	cwds map[string]string // working directories given at context creation
}

func (r *sandboxRef) envVars() map[string]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.rec.EnvVars
}

type refKey struct{}

func withRef(ctx context.Context, r *sandboxRef) context.Context {
	return context.WithValue(ctx, refKey{}, r)
}

func refFrom(ctx context.Context) *sandboxRef {
	r, _ := ctx.Value(refKey{}).(*sandboxRef)
	return r
}

// maxCachedRefs bounds the lookups kept; past it the cache starts over.
const maxCachedRefs = 4096

// resolve finds the sandbox of an ID whose token was checked.
func (s *Server) resolve(ctx context.Context, id string) (*sandboxRef, error) {
	s.mu.Lock()
	ref := s.sandboxes[id]
	s.mu.Unlock()
	if ref != nil {
		return ref, nil
	}
	rec, err := s.cfg.Store.E2BSandbox(ctx, id)
	if airlock.ErrorCode(err) == airlock.ENOTFOUND {
		return nil, errGone(id)
	}
	if err != nil {
		return nil, err
	}
	t, err := s.cfg.Tenants.TenantByID(ctx, rec.TenantID)
	if airlock.ErrorCode(err) == airlock.ENOTFOUND {
		return nil, errGone(id)
	}
	if err != nil {
		return nil, err
	}
	ref = &sandboxRef{id: id, tenant: t, rec: rec}
	s.mu.Lock()
	if len(s.sandboxes) >= maxCachedRefs {
		s.sandboxes = map[string]*sandboxRef{}
	}
	if old := s.sandboxes[id]; old != nil {
		ref = old
	} else {
		s.sandboxes[id] = ref
	}
	s.mu.Unlock()
	return ref, nil
}

// forget drops what the data plane holds of a sandbox that ended.
func (s *Server) forget(id string) {
	s.mu.Lock()
	delete(s.sandboxes, id)
	delete(s.ctxLocks, id)
	s.mu.Unlock()
	s.procs.dropSandbox(id)
}

// errGone is the answer for a sandbox that is not running: E2B's proxy
// answers 502, which the SDKs report as a sandbox that timed out or was
// killed.
func errGone(id string) error {
	return errorf(http.StatusBadGateway, fmt.Sprintf("sandbox %q is not running", clip(id, 100)))
}

// authorize checks the headers of a data-plane call: the sandbox ID and
// a token of that sandbox for one of the purposes (in its header), and
// returns the sandbox.
func (s *Server) authorize(ctx context.Context, h http.Header, purposes ...string) (*sandboxRef, error) {
	id := strings.TrimSpace(h.Get(headerSandboxID))
	if id == "" {
		return nil, errorf(400, "the E2b-Sandbox-Id header is required (set E2B_SANDBOX_URL to this server)")
	}
	if len(id) > 128 {
		return nil, errorf(400, "bad E2b-Sandbox-Id")
	}
	ok, key := false, ""
	for _, p := range purposes {
		hdr := headerAccessToken
		if p == purposeTraffic {
			hdr = headerTrafficToken
		}
		if k, valid := s.validToken(p, id, h.Get(hdr)); valid && !ok {
			ok, key = true, k
		}
	}
	if !ok {
		return nil, errorf(http.StatusUnauthorized, "missing or wrong access token for this sandbox")
	}
	ref, err := s.resolve(ctx, id)
	if err != nil {
		return nil, err
	}
	// The key the token was issued to must still work, at every call.
	if err := s.tokenKey(ctx, key, ref.tenant.ID); err != nil {
		return nil, err
	}
	return ref, nil
}

// serveSandbox routes a data-plane call by port: envd (49983) or the code
// interpreter (49999). Other ports are the sandbox's own servers, which
// header routing cannot reach.
func (s *Server) serveSandbox(w http.ResponseWriter, r *http.Request) {
	port := r.Header.Get(headerSandboxPort)
	interp := r.URL.Path == "/execute" || r.URL.Path == "/contexts" || strings.HasPrefix(r.URL.Path, "/contexts/")
	switch {
	case port == portInterpreter || port == "" && interp:
		s.serveInterpreter(w, r)
	case port == portEnvd || port == "":
		s.envd.ServeHTTP(w, r)
	default:
		writeJSON(w, http.StatusBadGateway, map[string]any{"code": 502, "message": fmt.Sprintf(
			"port %s of the sandbox is not reachable through Airlock: it serves envd (%s) and the code interpreter (%s)", clip(port, 10), portEnvd, portInterpreter)})
	}
}

// health answers GET /health: 204 while the sandbox runs, 502 after.
func (s *Server) health(w http.ResponseWriter, r *http.Request, purposes ...string) {
	ref, err := s.authorize(r.Context(), r.Header, purposes...)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	sess, err := s.cfg.Sessions.Session(r.Context(), ref.tenant, ref.id)
	if err != nil && airlock.ErrorCode(err) != airlock.ENOTFOUND {
		s.writeError(w, r, err)
		return
	}
	if err != nil || !sess.State.Live() {
		s.forget(ref.id)
		s.writeError(w, r, errGone(ref.id))
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
