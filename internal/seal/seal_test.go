package seal_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"io"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/airlockhq/airlock/internal/seal"
)

func sealBytes(t testing.TB, key []byte, plain, aad []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := seal.NewWriter(&buf, key, "dk-test", aad)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(plain); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func open(key, sealed, aad []byte) ([]byte, error) {
	r, err := seal.NewReader(bytes.NewReader(sealed), func(string) ([]byte, error) { return key, nil }, aad)
	if err != nil {
		return nil, err
	}
	return io.ReadAll(r)
}

func testKey() []byte {
	k := make([]byte, seal.KeySize)
	rand.Read(k)
	return k
}

func TestRoundTrip(t *testing.T) {
	key := testKey()
	for _, n := range []int{0, 1, seal.ChunkSize - 1, seal.ChunkSize, seal.ChunkSize + 1, 3*seal.ChunkSize + 17, 4 * seal.ChunkSize} {
		plain := make([]byte, n)
		rand.Read(plain)
		sealed := sealBytes(t, key, plain, []byte("ctx"))
		got, err := open(key, sealed, []byte("ctx"))
		if err != nil {
			t.Fatalf("%d bytes: %v", n, err)
		}
		if !bytes.Equal(got, plain) {
			t.Fatalf("%d bytes: plaintext differs", n)
		}
		if bytes.Contains(sealed, plain[:min(n, 32)]) && n >= 32 {
			t.Fatalf("%d bytes: plaintext visible in the sealed stream", n)
		}
	}
}

// Every way of damaging a stream is an error wrapping ErrCorrupt, and no
// plaintext is returned as if complete.
func TestDamageDetected(t *testing.T) {
	key := testKey()
	plain := make([]byte, 3*seal.ChunkSize+100)
	rand.Read(plain)
	aad := []byte("tenant/snapshot")
	sealed := sealBytes(t, key, plain, aad)
	hdr := len(sealed) - (len(plain) + 4*16)
	chunk := seal.ChunkSize + 16
	chunks := func(b []byte) [][]byte {
		var out [][]byte
		for b = b[hdr:]; len(b) > 0; {
			k := min(chunk, len(b))
			out = append(out, b[:k])
			b = b[k:]
		}
		return out
	}
	join := func(cs ...[]byte) []byte {
		out := append([]byte{}, sealed[:hdr]...)
		for _, c := range cs {
			out = append(out, c...)
		}
		return out
	}
	cs := chunks(sealed)
	if len(cs) != 4 {
		t.Fatalf("want 4 chunks, got %d", len(cs))
	}
	cases := map[string][]byte{
		"truncated at a chunk boundary": join(cs[0], cs[1], cs[2]),
		"truncated mid chunk":           sealed[:len(sealed)-50],
		"header only":                   sealed[:hdr],
		"chunks swapped":                join(cs[1], cs[0], cs[2], cs[3]),
		"chunk repeated":                join(cs[0], cs[0], cs[1], cs[2], cs[3]),
		"chunk dropped":                 join(cs[0], cs[2], cs[3]),
		"data appended":                 append(append([]byte{}, sealed...), 0),
		"empty":                         {},
		"not sealed":                    []byte("hello world, this is plainly not a sealed stream"),
	}
	for i := 0; i < 40; i++ {
		b := append([]byte{}, sealed...)
		b[mrand.IntN(len(b))] ^= 1 << mrand.IntN(8)
		cases["flipped bit "+string(rune('A'+i))] = b
	}
	for name, b := range cases {
		got, err := open(key, b, aad)
		if err == nil {
			t.Errorf("%s: opened (%d bytes)", name, len(got))
			continue
		}
		if !errors.Is(err, seal.ErrCorrupt) {
			t.Errorf("%s: error %v does not wrap ErrCorrupt", name, err)
		}
	}
	if _, err := open(key, sealed, []byte("other/snapshot")); !errors.Is(err, seal.ErrCorrupt) {
		t.Errorf("opened under another context: %v", err)
	}
	if _, err := open(testKey(), sealed, aad); !errors.Is(err, seal.ErrCorrupt) {
		t.Errorf("opened under another key: %v", err)
	}
}

// A 100 MB stream goes through in chunks: neither side holds it whole.
func TestStreamingBoundedMemory(t *testing.T) {
	key := testKey()
	const size = 100 << 20
	src := io.LimitReader(rand.Reader, size)
	pr, pw := io.Pipe()
	hIn := sha256.New()
	go func() {
		w, err := seal.NewWriter(pw, key, "dk-test", nil)
		if err != nil {
			pw.CloseWithError(err)
			return
		}
		if _, err := io.Copy(w, io.TeeReader(src, hIn)); err != nil {
			pw.CloseWithError(err)
			return
		}
		pw.CloseWithError(w.Close())
	}()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	r, err := seal.NewReader(pr, func(string) ([]byte, error) { return key, nil }, nil)
	if err != nil {
		t.Fatal(err)
	}
	hOut := sha256.New()
	n, err := io.Copy(hOut, r)
	if err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	if n != size || !bytes.Equal(hIn.Sum(nil), hOut.Sum(nil)) {
		t.Fatalf("got %d bytes, hash equal %v", n, bytes.Equal(hIn.Sum(nil), hOut.Sum(nil)))
	}
	if grew := int64(after.HeapInuse) - int64(before.HeapInuse); grew > 16<<20 {
		t.Fatalf("heap grew by %d bytes streaming 100 MB", grew)
	}
}

func TestMasterKeyParse(t *testing.T) {
	k1, text := seal.GenerateMasterKey()
	k2, err := seal.ParseMasterKey("  " + text + "\n")
	if err != nil || k1.ID() != k2.ID() {
		t.Fatalf("parse: %v, ids %s %s", err, k1.ID(), k2.ID())
	}
	for _, bad := range []string{"", "abc", text[:62], text + "00", "zz" + text[2:]} {
		if _, err := seal.ParseMasterKey(bad); !errors.Is(err, seal.ErrBadMasterKey) {
			t.Errorf("%q: %v", bad, err)
		}
	}
	dir := t.TempDir()
	p := filepath.Join(dir, "mk")
	os.WriteFile(p, []byte(text), 0o644)
	if _, err := seal.LoadMasterKey(p); err == nil {
		t.Error("a world-readable master key file was accepted")
	}
	os.Chmod(p, 0o600)
	if k, err := seal.LoadMasterKey(p); err != nil || k.ID() != k1.ID() {
		t.Errorf("load: %v", err)
	}
}

// Rotation re-wraps the data keys under the new master key; what was
// sealed before opens with the new master key alone.
func TestRotate(t *testing.T) {
	ctx := context.Background()
	store := newMemStore()
	oldMK, _ := seal.GenerateMasterKey()
	newMK, _ := seal.GenerateMasterKey()
	keys, err := seal.NewKeys(store, oldMK)
	if err != nil {
		t.Fatal(err)
	}
	sealedBy := map[string][]byte{}
	ids := map[string]string{}
	for _, tenant := range []string{"t1", "t2", "t3"} {
		id, dek, err := keys.DataKey(ctx, tenant)
		if err != nil {
			t.Fatal(err)
		}
		id2, dek2, _ := keys.DataKey(ctx, tenant)
		if id2 != id || !bytes.Equal(dek, dek2) {
			t.Fatal("a tenant's data key changed between calls")
		}
		ids[tenant] = id
		sealedBy[tenant] = sealBytes(t, dek, []byte("secret of "+tenant), []byte(tenant))
	}
	// The new master key alone cannot open the old keys.
	onlyNew, _ := seal.NewKeys(store, newMK)
	if _, err := onlyNew.DataKeyByID(ctx, "t1", ids["t1"]); !errors.Is(err, seal.ErrUnknownMasterKey) {
		t.Fatalf("before rotation: %v", err)
	}
	rot, _ := seal.NewKeys(store, newMK, oldMK)
	r, err := rot.Rotate(ctx)
	if err != nil || r.Rewrapped != 3 || r.Current != 0 {
		t.Fatalf("rotate: %+v %v", r, err)
	}
	if r, err := rot.Rotate(ctx); err != nil || r.Rewrapped != 0 || r.Current != 3 {
		t.Fatalf("second rotate: %+v %v", r, err)
	}
	after, _ := seal.NewKeys(store, newMK)
	for tenant, sealed := range sealedBy {
		dek, err := after.DataKeyByID(ctx, tenant, ids[tenant])
		if err != nil {
			t.Fatalf("%s after rotation: %v", tenant, err)
		}
		got, err := open(dek, sealed, []byte(tenant))
		if err != nil || string(got) != "secret of "+tenant {
			t.Fatalf("%s after rotation: %q %v", tenant, got, err)
		}
	}
	// The old master key no longer opens anything.
	stale, _ := seal.NewKeys(store, oldMK)
	if _, err := stale.DataKeyByID(ctx, "t1", ids["t1"]); !errors.Is(err, seal.ErrUnknownMasterKey) {
		t.Fatalf("old master key after rotation: %v", err)
	}
	// A wrapped key moved to another tenant does not open.
	k1, _ := store.TenantKey(ctx, "t1")
	store.keys["t2"].Wrapped = k1.Wrapped
	fresh, _ := seal.NewKeys(store, newMK)
	if _, err := fresh.DataKeyByID(ctx, "t2", ids["t2"]); err == nil {
		t.Fatal("a data key wrapped for t1 opened as t2's")
	}
}
