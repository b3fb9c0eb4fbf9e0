package rest

import (
	"net/http"
	"time"

	"github.com/airlockhq/airlock"
)

// createKeyRequest is the body of POST /v1/keys and POST
// /v1/admin/tenants/{name}/keys.
type createKeyRequest struct {
	Name      string     `json:"name"`
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
	// Format is "airlock" (alk_..., the default) or "e2b" (e2b_ and 40
	// hex digits, for E2B SDKs that check the format); both work on
	// every API.
	Format string `json:"format,omitempty"`
}

// createdKey is the answer to a key's creation: the key's record and its
// secret, shown this once.
type createdKey struct {
	*airlock.APIKey
	Key string `json:"key"`
}

// keyList is the answer to a list of keys: never a secret or a hash.
type keyList struct {
	Keys []*airlock.APIKey `json:"keys"`
}

// makeKey validates req and stores a new key of the role for the tenant
// ("" for an operator key).
func (s *Server) makeKey(r *http.Request, tenantID string, role airlock.Role, req createKeyRequest) (*createdKey, error) {
	if err := airlock.ValidateKeyName(req.Name); err != nil {
		return nil, errorf(airlock.EINVALID, "invalid-key-name", "%s", airlock.ErrorMessage(err))
	}
	if req.ExpiresAt != nil && !req.ExpiresAt.After(s.cfg.Now()) {
		return nil, errorf(airlock.EINVALID, "invalid-expiry", "expires_at must be in the future")
	}
	newKey := airlock.NewAPIKey
	switch req.Format {
	case "", "airlock":
	case "e2b":
		newKey = airlock.NewE2BAPIKey
	default:
		return nil, errorf(airlock.EINVALID, "invalid-key-format", "format must be airlock or e2b")
	}
	secret, k := newKey(tenantID, "", s.cfg.Now())
	k.Name, k.Role = req.Name, role
	if req.ExpiresAt != nil {
		t := req.ExpiresAt.UTC()
		k.ExpiresAt = &t
	}
	if err := s.cfg.Store.CreateAPIKey(r.Context(), k); err != nil {
		return nil, err
	}
	return &createdKey{APIKey: k, Key: secret}, nil
}

// listKeys answers GET /v1/keys: the tenant's own keys, revoked ones too.
func (s *Server) listKeys(w http.ResponseWriter, r *http.Request) {
	keys, err := s.cfg.Store.ListAPIKeys(r.Context(), airlock.KeyFilter{TenantID: TenantFrom(r.Context()).ID})
	if err != nil {
		s.error(w, r, err)
		return
	}
	s.writeJSON(w, r, http.StatusOK, keyList{Keys: keys})
}

// createKey answers POST /v1/keys: a new key of the caller's tenant (to
// rotate one: make a new key, move clients to it, revoke the old one;
// both work until then).
func (s *Server) createKey(w http.ResponseWriter, r *http.Request) {
	var req createKeyRequest
	if err := decodeJSON(w, r, &req); err != nil {
		s.audited(w, r, "key.create", "", "", err)
		return
	}
	k, err := s.makeKey(r, TenantFrom(r.Context()).ID, airlock.RoleTenant, req)
	if err != nil {
		s.audited(w, r, "key.create", "", "", err)
		return
	}
	s.auditOK(r, "key.create", k.ID, http.StatusCreated, "name="+quoteDetail(k.Name))
	s.writeJSON(w, r, http.StatusCreated, k)
}

// revokeKey answers DELETE /v1/keys/{key_id}: revokes one of the
// tenant's own keys (the one in use too). Another tenant's key, an
// operator key and one that never was are the same 404.
func (s *Server) revokeKey(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("key_id")
	tenant := TenantFrom(r.Context())
	k, err := s.cfg.Store.APIKey(r.Context(), id)
	if err == nil && k.TenantID != tenant.ID {
		err = keyNotFound(id)
	} else if airlock.ErrorCode(err) == airlock.ENOTFOUND {
		err = keyNotFound(id)
	}
	if err == nil {
		k, err = s.cfg.Store.RevokeAPIKey(r.Context(), id)
	}
	if err != nil {
		s.audited(w, r, "key.revoke", id, "", err)
		return
	}
	s.auditOK(r, "key.revoke", id, http.StatusOK, "")
	s.writeJSON(w, r, http.StatusOK, k)
}

func keyNotFound(id string) error {
	return airlock.Problem(airlock.ENOTFOUND, "key-not-found", "key %q not found", clipText(id, 100))
}

func clipText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
