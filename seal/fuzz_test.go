package seal_test

import (
	"bytes"
	"io"
	"testing"

	"github.com/airlockhq/airlock/seal"
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
