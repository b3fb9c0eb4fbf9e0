package rest

import (
	"net/http"
	"strings"

	"github.com/airlockhq/airlock"
)

// Authenticate says which tenant r is from by the key it carries: the
// E2B API's X-API-Key, or else a bearer key (the order the E2B routes
// use). A missing or unknown key is airlock.ErrUnauthorized; other
// errors are failures to decide. It serves front ends that must know
// the caller before they act for it (the fleet places nothing for an
// anonymous request).
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
	t, err := s.cfg.Store.TenantByKeyHash(r.Context(), airlock.HashAPIKey(key))
	if airlock.ErrorCode(err) == airlock.ENOTFOUND {
		return "", airlock.ErrUnauthorized
	}
	if err != nil {
		return "", err
	}
	return t.ID, nil
}
