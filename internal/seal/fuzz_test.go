package seal_test

import (
	"bytes"
	"errors"
	"io"
	"os"
	"testing"

	"github.com/airlockhq/airlock/internal/seal"
)

// FuzzReader: no input crashes the reader, and nothing but a stream the
// writer made under the key opens.
func FuzzReader(f *testing.F) {
	key := bytes.Repeat([]byte{7}, seal.KeySize)
	f.Add(sealBytes(f, key, []byte("hello"), nil))
	f.Add(sealBytes(f, key, bytes.Repeat([]byte("x"), seal.ChunkSize+1), nil))
	f.Add([]byte("ALKSEAL1\x01a"))
	if v1, err := os.ReadFile("testdata/v1.sealed"); err == nil {
		f.Add(v1)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := seal.NewReader(bytes.NewReader(b), func(string) ([]byte, error) { return key, nil }, nil)
		if err != nil {
			return
		}
		io.Copy(io.Discard, r)
	})
}

// FuzzParseHeader: no input crashes the header parser; a header it
// accepts is version 1 or 2 and names a key ID of 1 to 64 bytes that
// KeyID reads the same; every refusal wraps ErrCorrupt.
func FuzzParseHeader(f *testing.F) {
	key := bytes.Repeat([]byte{7}, seal.KeySize)
	f.Add(sealBytes(f, key, []byte("hello"), nil))
	if v1, err := os.ReadFile("testdata/v1.sealed"); err == nil {
		f.Add(v1[:200])
	}
	f.Add([]byte("ALKSEAL2\x01a"))
	f.Add([]byte("ALKSEAL9\x01a0000000"))
	f.Fuzz(func(t *testing.T, b []byte) {
		v, id, err := seal.ParseHeader(b)
		if err != nil {
			if !errors.Is(err, seal.ErrCorrupt) {
				t.Fatalf("error %v", err)
			}
			return
		}
		if v != 1 && v != 2 || id == "" || len(id) > 64 {
			t.Fatalf("accepted version %d key %q", v, id)
		}
		if kid, ok := seal.KeyID(b); !ok || kid != id {
			t.Fatalf("KeyID %q %v, header %q", kid, ok, id)
		}
	})
}

// FuzzParseMasterKey: any text either parses to a 32-byte key whose ID
// is stable, or is ErrBadMasterKey.
func FuzzParseMasterKey(f *testing.F) {
	_, text := seal.GenerateMasterKey()
	f.Add(text)
	f.Add("")
	f.Add("AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=")
	f.Fuzz(func(t *testing.T, s string) {
		k, err := seal.ParseMasterKey(s)
		if err != nil {
			if !errors.Is(err, seal.ErrBadMasterKey) {
				t.Fatalf("error %v", err)
			}
			return
		}
		k2, _ := seal.ParseMasterKey(s)
		if k.ID() != k2.ID() || len(k.ID()) != 19 {
			t.Fatalf("id %q %q", k.ID(), k2.ID())
		}
	})
}
