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

// E2BAPIKeyPrefix starts keys in the format some E2B SDK versions insist
// on: "e2b_" and 40 lowercase hex digits (160 random bits).
const E2BAPIKeyPrefix = "e2b_"

// NewE2BAPIKey is NewAPIKey in E2B's key format, for tenants whose E2B
// SDK checks the format of its key on the client side. The key works on
// every API like any other.
func NewE2BAPIKey(tenantID string, id string, now time.Time) (secret string, key *APIKey) {
	var b [20]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err)
	}
	secret = E2BAPIKeyPrefix + hex.EncodeToString(b[:])
	return secret, &APIKey{
		ID:        id,
		TenantID:  tenantID,
		Hash:      HashAPIKey(secret),
		Prefix:    secret[:len(E2BAPIKeyPrefix)+6],
		CreatedAt: now.UTC(),
	}
}

// HashAPIKey returns the stored form of a key: hex SHA-256. Keys carry 256
// bits of randomness, so a fast hash is enough.
func HashAPIKey(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}
