package seal_test

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"os"
	"testing"

	"github.com/airlockhq/airlock/internal/seal"
)

// v1Plain is the plaintext of testdata/v1.sealed, written by the version
// 1 writer under a data key of 32 sevens named "dek-v1-testdata", with
// the context "tenant-1\x00snap-1".
func v1Plain() []byte {
	p := make([]byte, seal.ChunkSize+4464)
	for i := range p {
		p[i] = byte(i*31 + i/251)
	}
	return p
}

// A snapshot sealed in format 1 (one data key, random nonce prefix)
// before format 2 existed still opens, and still detects damage.
func TestVersion1StillOpens(t *testing.T) {
	sealed, err := os.ReadFile("testdata/v1.sealed")
	if err != nil {
		t.Fatal(err)
	}
	key := bytes.Repeat([]byte{7}, seal.KeySize)
	aad := []byte("tenant-1\x00snap-1")
	if v, id, err := seal.ParseHeader(sealed); err != nil || v != 1 || id != "dek-v1-testdata" {
		t.Fatalf("header: version %d, key %q, %v", v, id, err)
	}
	got, err := open(key, sealed, aad)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, v1Plain()) {
		t.Fatal("the version 1 stream opened to other plaintext")
	}
	bad := append([]byte{}, sealed...)
	bad[len(bad)-3] ^= 1
	if _, err := open(key, bad, aad); !errors.Is(err, seal.ErrCorrupt) {
		t.Fatalf("damaged version 1 stream: %v", err)
	}
	if _, err := open(key, sealed, []byte("tenant-2\x00snap-1")); !errors.Is(err, seal.ErrCorrupt) {
		t.Fatalf("version 1 stream under another context: %v", err)
	}
}

// A new stream is format 2: a random salt in its header, and its chunks
// sealed under HKDF-SHA256(data key, salt), not under the data key, with
// the chunk index as the nonce. Two streams under one data key get
// different salts, so different keys.
func TestVersion2PerStreamKey(t *testing.T) {
	dek := testKey()
	const keyID = "dk-test"
	plain := []byte("a workspace snapshot")
	a := sealBytes(t, dek, plain, []byte("ctx"))
	b := sealBytes(t, dek, plain, []byte("ctx"))
	if v, id, err := seal.ParseHeader(a); err != nil || v != seal.Version || seal.Version != 2 || id != keyID {
		t.Fatalf("header: version %d, key %q, %v", v, id, err)
	}
	if string(a[:8]) != "ALKSEAL2" {
		t.Fatalf("magic %q", a[:8])
	}
	hdrLen := 8 + 1 + len(keyID) + 32 + 4
	salt := func(s []byte) []byte { return s[8+1+len(keyID) : 8+1+len(keyID)+32] }
	if bytes.Equal(salt(a), salt(b)) || bytes.Equal(salt(a), make([]byte, 32)) {
		t.Fatal("two streams share a salt")
	}
	if n := binary.BigEndian.Uint32(a[hdrLen-4 : hdrLen]); n != seal.ChunkSize {
		t.Fatalf("chunk size %d", n)
	}
	// Open the one (final) chunk by hand, as the format says.
	sub, err := hkdf.Key(sha256.New, dek, salt(a), "airlock seal v2 stream\x00"+keyID, 32)
	if err != nil {
		t.Fatal(err)
	}
	gcm := func(k []byte) cipher.AEAD {
		c, _ := aes.NewCipher(k)
		g, _ := cipher.NewGCM(c)
		return g
	}
	nonce := make([]byte, 12)
	nonce[11] = 1 // chunk 0, final
	aad := append(append([]byte{}, a[:hdrLen]...), "ctx"...)
	got, err := gcm(sub).Open(nil, nonce, a[hdrLen:], aad)
	if err != nil || !bytes.Equal(got, plain) {
		t.Fatalf("the chunk does not open under the derived key: %q, %v", got, err)
	}
	if _, err := gcm(dek).Open(nil, nonce, a[hdrLen:], aad); err == nil {
		t.Fatal("the chunk opens under the data key itself")
	}
}

// An unknown version, a bad key ID length or a cut header is ErrCorrupt.
func TestHeaderRefused(t *testing.T) {
	good := sealBytes(t, testKey(), []byte("x"), nil)
	for name, b := range map[string][]byte{
		"version 3":     append([]byte("ALKSEAL3"), good[8:]...),
		"version 0":     append([]byte("ALKSEAL0"), good[8:]...),
		"no key ID":     append([]byte("ALKSEAL2\x00"), good[9:]...),
		"key ID of 65":  append([]byte("ALKSEAL2\x41"), bytes.Repeat([]byte("k"), 200)...),
		"cut in salt":   good[:20],
		"magic only":    good[:8],
		"other magic":   append([]byte("ALKSEAX2"), good[8:]...),
		"chunk size 1k": append(append([]byte{}, good[:8+1+7+32]...), 0, 0, 4, 0),
	} {
		if _, _, err := seal.ParseHeader(b); !errors.Is(err, seal.ErrCorrupt) {
			t.Errorf("%s: %v", name, err)
		}
		if _, err := open(testKey(), b, nil); !errors.Is(err, seal.ErrCorrupt) {
			t.Errorf("%s: opened: %v", name, err)
		}
	}
}
