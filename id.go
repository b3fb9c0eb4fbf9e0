package airlock

import (
	"crypto/rand"
	"encoding/hex"
)

// NewID returns a random 128-bit ID in hex: safe in paths, URLs, runsc
// container IDs and blob keys.
func NewID() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return hex.EncodeToString(b[:])
}
