package rest

import (
	"net/http"
	"strings"
	"time"

	"github.com/airlockhq/airlock"
)

// Problem types of roles.
const (
	// ProblemAdminRequired refuses a tenant key on an admin route (403).
	ProblemAdminRequired = "admin-role-required"
	// ProblemTenantKeyRequired refuses an operator key on a tenant's
	// route: it belongs to no tenant (403).
	ProblemTenantKeyRequired = "tenant-key-required"
)

// Authenticator resolves the bearer key of a request to its key and
// tenant. It reads the store on every request (no cache), so a key
// revoked or expired is refused by every node that shares the store from
// the next request on. The fleet's router and the REST API use the same
// one.
type Authenticator struct {
	Keys airlock.KeyResolver
	Now  func() time.Time // time.Now if nil
}

// Authenticate returns who the request's "Authorization: Bearer <key>"
// is, or an error: EUNAUTHORIZED (as a problem: unauthorized, key-revoked,
// key-expired) for a missing, malformed, unknown, revoked or expired
// key, else the store's error.
func (a Authenticator) Authenticate(r *http.Request) (*airlock.Principal, error) {
	key, ok := bearerKey(r.Header.Get("Authorization"))
	if !ok {
		return nil, airlock.ErrUnauthorized
	}
	return a.AuthenticateSecret(r, key)
}

// AuthenticateSecret is Authenticate for a key found elsewhere than the
// Authorization header (the E2B API's X-API-KEY).
func (a Authenticator) AuthenticateSecret(r *http.Request, secret string) (*airlock.Principal, error) {
	now := time.Now
	if a.Now != nil {
		now = a.Now
	}
	return airlock.Authenticate(r.Context(), a.Keys, secret, now())
}

// authenticate resolves the bearer key of a request and puts who it is in
// the request context. A wrong key is always 401; a missing one is 401 if
// the mode requires one, else the handler decides. An operator key opens
// admin routes only (403 tenant-key-required elsewhere), a tenant key
// tenant routes only (403 admin-role-required on admin routes).
func (s *Server) authenticate(next http.Handler, mode authMode) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") == "" && mode == authOptional {
			next.ServeHTTP(w, r)
			return
		}
		if key := ptyKeyFromSubprotocol(r); key != "" && r.Header.Get("Authorization") == "" {
			// A browser's WebSocket carries its key as a subprotocol.
			r = r.Clone(r.Context())
			r.Header.Set("Authorization", "Bearer "+key)
		}
		p, err := s.auth.Authenticate(r)
		if airlock.ErrorCode(err) == airlock.EUNAUTHORIZED {
			w.Header().Set("WWW-Authenticate", `Bearer realm="airlock"`)
			s.error(w, r, err)
			return
		} else if err != nil {
			s.error(w, r, err)
			return
		}
		ri := info(r.Context())
		ri.principal = p
		switch {
		case mode == authAdmin && !p.IsAdmin():
			s.audited(w, r, "admin.denied", r.Method+" "+r.URL.Path, "",
				errorf(airlock.EFORBIDDEN, ProblemAdminRequired, "this route needs an operator (admin) key"))
			return
		case mode != authAdmin && p.IsAdmin():
			if mode == authOptional {
				next.ServeHTTP(w, r) // as if anonymous: a signed URL still works
				return
			}
			s.error(w, r, errorf(airlock.EFORBIDDEN, ProblemTenantKeyRequired,
				"an operator key belongs to no tenant: use a tenant's key here, or /v1/admin/..."))
			return
		}
		ri.tenant = p.Tenant
		next.ServeHTTP(w, r)
	})
}

// PrincipalFrom returns who authenticated the request, or nil.
func PrincipalFrom(r *http.Request) *airlock.Principal { return info(r.Context()).principal }

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
