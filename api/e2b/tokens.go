package e2b

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
)

// A sandbox's access tokens are derived, never stored: HMAC-SHA256 of the
// server secret over the purpose and the sandbox ID. So the same sandbox
// gets the same tokens from create and every connect, across restarts of
// airlockd, and a token opens exactly one sandbox.
const (
	purposeEnvd    = "envd"    // envdAccessToken, sent as X-Access-Token
	purposeTraffic = "traffic" // trafficAccessToken, sent as E2B-Traffic-Access-Token
)

func (s *Server) token(purpose, sandboxID string) string {
	mac := hmac.New(sha256.New, s.cfg.Secret)
	mac.Write([]byte("airlock-e2b-token\x00" + purpose + "\x00" + sandboxID))
	return hex.EncodeToString(mac.Sum(nil))
}

// validToken reports, in constant time, whether got is the sandbox's
// token for the purpose.
func (s *Server) validToken(purpose, sandboxID, got string) bool {
	if got == "" || len(got) > 128 {
		return false
	}
	return hmac.Equal([]byte(got), []byte(s.token(purpose, sandboxID)))
}
