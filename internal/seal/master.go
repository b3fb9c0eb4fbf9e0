package seal

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
)

// KeySize is the size of master and data keys: AES-256.
const KeySize = 32

// ErrBadMasterKey is wrapped by the error for master key text that is not
// 32 bytes in hex or base64.
var ErrBadMasterKey = errors.New("seal: a master key is 32 bytes, written as 64 hex digits or in base64")

// MasterKey is an operator's key-encrypting key.
type MasterKey struct {
	id  string
	key [KeySize]byte
}

// ID names the key without revealing it: "mk-" and 16 hex digits of a
// hash of its bytes. Wrapped data keys record it.
func (k *MasterKey) ID() string { return k.id }

func newMasterKey(b []byte) *MasterKey {
	k := &MasterKey{}
	copy(k.key[:], b)
	h := sha256.Sum256(append([]byte("airlock master key id\x00"), b...))
	k.id = "mk-" + hex.EncodeToString(h[:8])
	return k
}

// ParseMasterKey reads a master key written as 64 hex digits or as the
// standard base64 of 32 bytes; surrounding white space is ignored.
func ParseMasterKey(text string) (*MasterKey, error) {
	s := strings.TrimSpace(text)
	if b, err := hex.DecodeString(s); err == nil && len(b) == KeySize {
		return newMasterKey(b), nil
	}
	if b, err := base64.StdEncoding.DecodeString(s); err == nil && len(b) == KeySize {
		return newMasterKey(b), nil
	}
	return nil, ErrBadMasterKey
}

// LoadMasterKey reads a master key from a file, which must not be
// readable by group or others.
func LoadMasterKey(path string) (*MasterKey, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("seal: master key: %w", err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("seal: master key file %s is readable by others (mode %v); chmod 600 it", path, fi.Mode().Perm())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("seal: master key: %w", err)
	}
	k, err := ParseMasterKey(string(b))
	if err != nil {
		return nil, fmt.Errorf("%w (in %s)", err, path)
	}
	return k, nil
}

// GenerateMasterKey returns a new random master key and its text (hex).
func GenerateMasterKey() (*MasterKey, string) {
	b := make([]byte, KeySize)
	rand.Read(b)
	return newMasterKey(b), hex.EncodeToString(b)
}
