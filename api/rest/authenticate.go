package rest

import (
	"net/http"
	"strings"

	"github.com/airlockhq/airlock"
)

// Authenticate says which tenant r is from by the key it carries: the
// E2B API's X-API-Key, or else a bearer key (the order the E2B routes
// use), through the same revocation-aware check as every route: a
// missing, unknown, revoked or expired key is EUNAUTHORIZED; other
// errors are failures to decide. An operator key is let through with no
// tenant (the node it reaches answers what an operator key may do). It
// serves front ends that must know the caller before they act for it
// (the fleet places nothing for an anonymous request).
func (s *Server) Authenticate(r *http.Request) (string, error) {
	key := strings.TrimSpace(r.Header.Get("X-Api-Key"))
	if key == "" {
		k, ok := bearerKey(r.Header.Get("Authorization"))
		if !ok {
			return "", airlock.ErrUnauthorized
		}
		key = k
	}
	if len(key) > maxKeyBytes {
		return "", airlock.ErrUnauthorized
	}
	p, err := s.auth.AuthenticateSecret(r, key)
	if err != nil {
		return "", err
	}
	if p.IsAdmin() || p.Tenant == nil {
		return "", nil
	}
	return p.Tenant.ID, nil
}
