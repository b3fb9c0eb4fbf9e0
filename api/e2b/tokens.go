package e2b

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"github.com/airlockhq/airlock"
)

// A sandbox's access tokens are derived, never stored: the ID of the API
// key they were issued to, a dot, and the HMAC-SHA256 of the server
// secret over the purpose, the sandbox ID and that key's ID. So the same
// key gets the same tokens from create and every connect, across
// restarts of airlockd; a token opens exactly one sandbox; and it stops
// working when its key is revoked or expires (checked at every use).
const (
	purposeEnvd    = "envd"    // envdAccessToken, sent as X-Access-Token
	purposeTraffic = "traffic" // trafficAccessToken, sent as E2B-Traffic-Access-Token
)

func (s *Server) token(purpose, sandboxID, keyID string) string {
	mac := hmac.New(sha256.New, s.cfg.Secret)
	mac.Write([]byte("airlock-e2b-token\x00" + purpose + "\x00" + sandboxID + "\x00" + keyID))
	return keyID + "." + hex.EncodeToString(mac.Sum(nil))
}

// validToken reports, in constant time, whether got is a token of the
// sandbox for the purpose, and returns the ID of the key it was issued to.
func (s *Server) validToken(purpose, sandboxID, got string) (keyID string, ok bool) {
	if got == "" || len(got) > 160 {
		return "", false
	}
	keyID, _, found := strings.Cut(got, ".")
	if !found || keyID == "" {
		return "", false
	}
	return keyID, hmac.Equal([]byte(got), []byte(s.token(purpose, sandboxID, keyID)))
}

// tokenKey checks that the key a token was issued to still works and is
// a key of the tenant.
func (s *Server) tokenKey(ctx context.Context, keyID, tenantID string) error {
	k, err := airlock.KeyByID(ctx, s.cfg.Tenants, keyID, s.cfg.Now())
	if airlock.ErrorCode(err) == airlock.EUNAUTHORIZED || err == nil && k.TenantID != tenantID {
		return errorf(401, "the API key this sandbox's access token was issued to was revoked or has expired")
	}
	return err
}

// HeaderTraffic carries a sandbox's trafficAccessToken.
const HeaderTraffic = "E2B-Traffic-Access-Token"

// TokenHeader is the header a sandbox's traffic token travels in to its
// preview URLs (the host getHost(port) returns).
func (s *Server) TokenHeader() string { return HeaderTraffic }

// TokenTenant checks a sandbox's trafficAccessToken for a preview URL of
// the sandbox: it must be the sandbox's, and the key it was issued to
// must still work; the answer is that key's tenant (whose session the
// preview service then looks up). Anything else is EUNAUTHORIZED.
func (s *Server) TokenTenant(ctx context.Context, sandboxID, token string) (*airlock.Tenant, error) {
	keyID, ok := s.validToken(purposeTraffic, sandboxID, token)
	if !ok {
		return nil, airlock.ErrUnauthorized
	}
	k, err := airlock.KeyByID(ctx, s.cfg.Tenants, keyID, s.cfg.Now())
	if err != nil {
		return nil, err
	}
	if k.TenantID == "" {
		return nil, airlock.ErrUnauthorized
	}
	t, err := s.cfg.Tenants.TenantByID(ctx, k.TenantID)
	if airlock.ErrorCode(err) == airlock.ENOTFOUND {
		return nil, airlock.ErrUnauthorized
	}
	return t, err
}
