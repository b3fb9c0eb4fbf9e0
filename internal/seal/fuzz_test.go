package seal_test

import (
	"bytes"
	"errors"
	"io"
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
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := seal.NewReader(bytes.NewReader(b), func(string) ([]byte, error) { return key, nil }, nil)
		if err != nil {
			return
		}
		io.Copy(io.Discard, r)
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
