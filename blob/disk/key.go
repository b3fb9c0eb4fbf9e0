package disk

import (
	"strings"

	"github.com/airlockhq/airlock"
)

// MaxKeyBytes caps the length of a blob key.
const MaxKeyBytes = 512

// ValidateKey reports whether key is a valid blob key: slash-separated
// segments of [A-Za-z0-9._-], none empty, "." or "..", with no leading or
// trailing slash, at most MaxKeyBytes long. The error is EINVALID with
// problem type "invalid-blob-key".
func ValidateKey(key string) error {
	if key == "" {
		return invalidKey(key, "empty")
	}
	if len(key) > MaxKeyBytes {
		return invalidKey(key, "longer than 512 bytes")
	}
	for i := 0; i < len(key); i++ {
		if !keyByte(key[i]) {
			return invalidKey(key, "only A-Z a-z 0-9 . _ - and / are allowed")
		}
	}
	for seg := range strings.SplitSeq(key, "/") {
		switch seg {
		case "":
			return invalidKey(key, "empty segment or leading or trailing slash")
		case ".", "..":
			return invalidKey(key, `"." and ".." segments are not allowed`)
		}
	}
	return nil
}

func keyByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
		c == '.' || c == '_' || c == '-' || c == '/'
}

func invalidKey(key, why string) error {
	if len(key) > 64 {
		key = key[:64] + "..."
	}
	return airlock.Problem(airlock.EINVALID, "invalid-blob-key", "invalid blob key %q: %s", key, why)
}
