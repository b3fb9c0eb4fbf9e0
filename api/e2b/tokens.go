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
