package airlock

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"encoding/hex"
	"strings"
	"time"
)

// APIKeyPrefix starts every API key, so leaked keys are easy to scan for.
const APIKeyPrefix = "alk_"

// NewAPIKey makes a new random key for the tenant. It returns the secret,
// which is shown once and never stored, and the record to store.
func NewAPIKey(tenantID string, id string, now time.Time) (secret string, key *APIKey) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand never fails on Linux
	}
	secret = APIKeyPrefix + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(b[:]))
	return secret, &APIKey{
		ID:        id,
		TenantID:  tenantID,
		Hash:      HashAPIKey(secret),
		Prefix:    secret[:len(APIKeyPrefix)+6],
		CreatedAt: now.UTC(),
	}
}

// HashAPIKey returns the stored form of a key: hex SHA-256. Keys carry 256
// bits of randomness, so a fast hash is enough.
func HashAPIKey(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}
