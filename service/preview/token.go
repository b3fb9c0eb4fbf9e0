package preview

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"time"
)

// A token is "apt1." + base64url(claims) + "." + base64url(HMAC-SHA256
// over "apt1." + the encoded claims), keyed by a key derived from the
// node's signing key. It names one session, one port, its expiry and
// its ID; it is honoured only while the node that issued it (or one of
// its fleet, holding the session) still lists its ID for the port, so
// revoking drops the ID.
const tokenPrefix = "apt1."

// maxTokenBytes bounds a token read from a request.
const maxTokenBytes = 512

// claims are what a token says.
type claims struct {
	SessionID string `json:"s"`
	Port      int    `json:"p"`
	Expires   int64  `json:"e"` // unix seconds
	ID        string `json:"i"`
}

var (
	errTokenMalformed = errors.New("preview: malformed token")
	errTokenSignature = errors.New("preview: token signature does not verify")
	errTokenExpired   = errors.New("preview: token expired")
)

// deriveKey makes the token key from the node's signing key, so the
// same secret never signs two kinds of thing.
func deriveKey(signingKey []byte) []byte {
	m := hmac.New(sha256.New, signingKey)
	m.Write([]byte("airlock preview token v1"))
	return m.Sum(nil)
}

func sign(key []byte, c claims) string {
	body, _ := json.Marshal(c)
	msg := tokenPrefix + base64.RawURLEncoding.EncodeToString(body)
	m := hmac.New(sha256.New, key)
	m.Write([]byte(msg))
	return msg + "." + base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// verify checks a token's form, signature and expiry and returns what it
// says. It does not check that the token is still listed (not revoked).
func verify(key []byte, tok string, now time.Time) (claims, error) {
	var c claims
	if len(tok) > maxTokenBytes || !strings.HasPrefix(tok, tokenPrefix) {
		return c, errTokenMalformed
	}
	i := strings.LastIndexByte(tok, '.')
	if i <= len(tokenPrefix) {
		return c, errTokenMalformed
	}
	sig, err := base64.RawURLEncoding.DecodeString(tok[i+1:])
	if err != nil {
		return c, errTokenMalformed
	}
	m := hmac.New(sha256.New, key)
	m.Write([]byte(tok[:i]))
	if !hmac.Equal(sig, m.Sum(nil)) {
		return c, errTokenSignature
	}
	body, err := base64.RawURLEncoding.DecodeString(tok[len(tokenPrefix):i])
	if err != nil || json.Unmarshal(body, &c) != nil || c.ID == "" {
		return c, errTokenMalformed
	}
	if now.Unix() >= c.Expires {
		return c, errTokenExpired
	}
	return c, nil
}
