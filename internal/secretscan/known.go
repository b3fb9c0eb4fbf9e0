package secretscan

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
)

// MinSecretBytes is the shortest host secret matched exactly: shorter
// values would match by chance (a broker credential "password" is in
// thousands of files of any rootfs), and are too weak to be kept secret
// anyway.
const MinSecretBytes = 12

// Secret is a value the host holds that must never appear in anything a
// sandbox is given. Name says what it is ("broker credential of scope
// github") and is what a finding shows; Value is never shown.
type Secret struct {
	Name  string
	Value []byte
}

// Known is the set of secret values the host holds, read at every scan:
// values added directly and sources called each time (a credential file
// that may be rotated, a key file created after start). It is safe for
// concurrent use; the zero value is empty.
type Known struct {
	mu      sync.Mutex
	static  []Secret
	sources []func() []Secret
}

// Add adds a value; values shorter than MinSecretBytes are ignored.
func (k *Known) Add(name string, value []byte) {
	if len(value) < MinSecretBytes {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.static = append(k.static, Secret{Name: name, Value: bytes.Clone(value)})
}

// AddSource adds a function called at every scan for the current values.
func (k *Known) AddSource(f func() []Secret) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.sources = append(k.sources, f)
}

// AddFile adds the content of a file, read at every scan: a text file
// without the white space around it, a binary key as it is. A missing
// file adds nothing (a key written later is picked up then).
func (k *Known) AddFile(name, path string) {
	k.AddSource(func() []Secret {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil
		}
		if isText(b) {
			b = bytes.TrimSpace(b)
		}
		return []Secret{{Name: name, Value: b}}
	})
}

// isText reports whether b is printable ASCII and white space.
func isText(b []byte) bool {
	for _, c := range b {
		if (c < 0x20 || c > 0x7e) && c != '\n' && c != '\r' && c != '\t' {
			return false
		}
	}
	return true
}

// StateDirFiles are airlockd's own secrets in its state directory: the
// default tenant's API key, the operator's key, the key signing artifact URLs and the E2B
// front-end's token secret.
var StateDirFiles = map[string]string{
	"default.key": "airlockd default tenant API key",
	"admin.key":   "airlockd operator (admin) API key",
	"signing.key": "airlockd signing key",
	"e2b.key":     "airlockd E2B token secret",
	"master.key":  "airlockd master key (seals snapshots)",
}

// AddStateDir adds airlockd's key files in stateDir (StateDirFiles).
func (k *Known) AddStateDir(stateDir string) {
	for file, name := range StateDirFiles {
		k.AddFile(name+" ("+file+")", filepath.Join(stateDir, file))
	}
}

// Secrets returns the current values, each at least MinSecretBytes long.
func (k *Known) Secrets() []Secret {
	if k == nil {
		return nil
	}
	k.mu.Lock()
	out := append([]Secret(nil), k.static...)
	sources := append([]func() []Secret(nil), k.sources...)
	k.mu.Unlock()
	for _, f := range sources {
		for _, s := range f() {
			if len(s.Value) >= MinSecretBytes {
				out = append(out, s)
			}
		}
	}
	return out
}

// encodings returns the forms of a secret value matched: the bytes
// themselves and, since a binary key is often carried encoded, its hex
// (both cases) and base64 (standard and URL alphabets, padded or not).
func encodings(v []byte) [][]byte {
	out := [][]byte{v}
	h := hex.EncodeToString(v)
	out = append(out, []byte(h), bytes.ToUpper([]byte(h)))
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		out = append(out, []byte(enc.EncodeToString(v)))
	}
	// Drop duplicates (a value without bytes that differ by encoding).
	var uniq [][]byte
	for _, e := range out {
		dup := false
		for _, u := range uniq {
			if bytes.Equal(u, e) {
				dup = true
				break
			}
		}
		if !dup {
			uniq = append(uniq, e)
		}
	}
	return uniq
}

// errNotExist reports a missing file or directory.
func errNotExist(err error) bool { return errors.Is(err, fs.ErrNotExist) }
