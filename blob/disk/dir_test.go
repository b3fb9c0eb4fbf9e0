package disk_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/blob/disk"
)

func newDir(t *testing.T) (*disk.Dir, string) {
	t.Helper()
	root := filepath.Join(t.TempDir(), "blobs-root")
	d, err := disk.New(disk.Config{Dir: root})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d, root
}

// regularFiles lists every regular file under root.
func regularFiles(t *testing.T, root string) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if e.Type().IsRegular() {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

func readBlob(t *testing.T, d *disk.Dir, key string) ([]byte, int64) {
	t.Helper()
	rc, size, err := d.Open(context.Background(), key)
	if err != nil {
		t.Fatalf("Open(%s): %v", key, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return b, size
}

func TestConfigValidate(t *testing.T) {
	for _, tt := range []struct {
		dir string
		ok  bool
	}{{"/var/lib/airlock/blobs", true}, {"rel", true}, {"", false}, {"a\x00b", false}} {
		if err := (disk.Config{Dir: tt.dir}).Validate(); (err == nil) != tt.ok {
			t.Errorf("Validate(%q) = %v, want ok=%v", tt.dir, err, tt.ok)
		}
	}
}

func TestRoundTrip(t *testing.T) {
	ctx := context.Background()
	d, root := newDir(t)

	tests := []struct {
		key  string
		data []byte
	}{
		{"empty", nil},
		{"t1/e1/out.txt", []byte("hello\n")},
		{"t1/e1/.hidden", []byte("dot file")},
		{"t1/e2/big.bin", bytes.Repeat([]byte{0, 1, 2, 3, 255}, 300_000)},
	}
	for _, tt := range tests {
		t.Run(tt.key, func(t *testing.T) {
			n, err := d.Put(ctx, tt.key, bytes.NewReader(tt.data))
			if err != nil || n != int64(len(tt.data)) {
				t.Fatalf("Put = %d, %v; want %d", n, err, len(tt.data))
			}
			got, size := readBlob(t, d, tt.key)
			if size != int64(len(tt.data)) || !bytes.Equal(got, tt.data) {
				t.Fatalf("read back %d bytes (size %d), want %d", len(got), size, len(tt.data))
			}
		})
	}

	// Overwrite, then seek.
	if _, err := d.Put(ctx, "t1/e1/out.txt", strings.NewReader("replaced")); err != nil {
		t.Fatal(err)
	}
	rc, size, err := d.Open(ctx, "t1/e1/out.txt")
	if err != nil || size != 8 {
		t.Fatalf("Open after overwrite: size %d, %v", size, err)
	}
	if _, err := rc.Seek(4, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	if b, _ := io.ReadAll(rc); string(b) != "aced" {
		t.Errorf("after seek read %q, want %q", b, "aced")
	}
	rc.Close()

	// Modes: files 0600, directories 0700.
	filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			t.Fatal(err)
		}
		fi, _ := e.Info()
		want := fs.FileMode(0o600)
		if e.IsDir() {
			want = 0o700
		}
		if fi.Mode().Perm() != want {
			t.Errorf("%s: mode %v, want %v", p, fi.Mode().Perm(), want)
		}
		return nil
	})

	// Delete is idempotent; a deleted blob is not found.
	for i := range 2 {
		if err := d.Delete(ctx, "t1/e1/out.txt"); err != nil {
			t.Fatalf("Delete #%d: %v", i+1, err)
		}
	}
	_, _, err = d.Open(ctx, "t1/e1/out.txt")
	if !errors.Is(err, airlock.ErrNotFound) || airlock.ErrorCode(err) != airlock.ENOTFOUND {
		t.Errorf("Open after Delete: %v, want not found", err)
	}
	if err := d.Delete(ctx, "never/was"); err != nil {
		t.Errorf("Delete of a missing key: %v", err)
	}
}

func TestInvalidKeys(t *testing.T) {
	ctx := context.Background()
	d, root := newDir(t)
	tests := []struct {
		name string
		key  string
	}{
		{"empty", ""},
		{"leading slash", "/etc/passwd"},
		{"trailing slash", "a/b/"},
		{"empty segment", "a//b"},
		{"dot", "a/./b"},
		{"dot only", "."},
		{"dotdot", "../escape"},
		{"dotdot inside", "a/../../b"},
		{"backslash", `a\b`},
		{"space", "a b"},
		{"nul", "a\x00b"},
		{"newline", "a\nb"},
		{"unicode", "caf\u00e9"},
		{"percent", "a%2fb"},
		{"too long", strings.Repeat("a", disk.MaxKeyBytes+1)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			check := func(op string, err error) {
				t.Helper()
				var ae *airlock.Error
				if !errors.As(err, &ae) || ae.Code != airlock.EINVALID || ae.Type != "invalid-blob-key" {
					t.Errorf("%s(%q) = %v, want EINVALID invalid-blob-key", op, tt.key, err)
				}
			}
			_, err := d.Put(ctx, tt.key, strings.NewReader("x"))
			check("Put", err)
			_, _, err = d.Open(ctx, tt.key)
			check("Open", err)
			check("Delete", d.Delete(ctx, tt.key))
			check("ValidateKey", disk.ValidateKey(tt.key))
		})
	}
	if files := regularFiles(t, filepath.Dir(root)); len(files) != 0 {
		t.Errorf("invalid keys left files: %v", files)
	}

	for _, ok := range []string{"a", "A-z_0.9", "t/e/f.tar.gz", "..a", "a..", strings.Repeat("a", disk.MaxKeyBytes)} {
		if err := disk.ValidateKey(ok); err != nil {
			t.Errorf("ValidateKey(%q) = %v, want nil", ok, err)
		}
	}
}

// failingReader yields some bytes, then an error.
type failingReader struct{ n int }

func (r *failingReader) Read(p []byte) (int, error) {
	if r.n <= 0 {
		return 0, errors.New("upstream broke")
	}
	k := min(len(p), r.n)
	for i := range k {
		p[i] = 'x'
	}
	r.n -= k
	return k, nil
}

func TestFailedPutLeavesNothing(t *testing.T) {
	d, root := newDir(t)
	canceled, cancel := context.WithCancel(context.Background())
	cancel()

	tests := []struct {
		name string
		ctx  context.Context
		r    io.Reader
	}{
		{"reader fails", context.Background(), &failingReader{n: 100_000}},
		{"reader fails at once", context.Background(), &failingReader{}},
		{"context canceled", canceled, strings.NewReader("data")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := d.Put(tt.ctx, "t/e/file", tt.r); err == nil {
				t.Fatal("Put succeeded")
			}
			if _, _, err := d.Open(context.Background(), "t/e/file"); airlock.ErrorCode(err) != airlock.ENOTFOUND {
				t.Errorf("Open after failed Put: %v, want not found", err)
			}
			if files := regularFiles(t, root); len(files) != 0 {
				t.Errorf("failed Put left files: %v", files)
			}
		})
	}

	// A failed overwrite keeps the old blob whole.
	ctx := context.Background()
	if _, err := d.Put(ctx, "keep", strings.NewReader("original")); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Put(ctx, "keep", &failingReader{n: 10}); err == nil {
		t.Fatal("Put succeeded")
	}
	if b, _ := readBlob(t, d, "keep"); string(b) != "original" {
		t.Errorf("after failed overwrite: %q", b)
	}
}

func TestConcurrentPuts(t *testing.T) {
	ctx := context.Background()
	d, _ := newDir(t)
	const n = 32
	var wg sync.WaitGroup
	errc := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			key := fmt.Sprintf("tenant-%d/exec/file-%d", i%3, i)
			data := bytes.Repeat([]byte{byte(i)}, 10_000+i)
			if _, err := d.Put(ctx, key, bytes.NewReader(data)); err != nil {
				errc <- fmt.Errorf("Put(%s): %w", key, err)
			}
		})
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Error(err)
	}
	for i := range n {
		key := fmt.Sprintf("tenant-%d/exec/file-%d", i%3, i)
		got, _ := readBlob(t, d, key)
		if !bytes.Equal(got, bytes.Repeat([]byte{byte(i)}, 10_000+i)) {
			t.Errorf("%s: wrong content", key)
		}
	}
}

func TestKeyConflicts(t *testing.T) {
	ctx := context.Background()
	d, _ := newDir(t)
	put := func(key string) error {
		_, err := d.Put(ctx, key, strings.NewReader(key))
		return err
	}
	if err := put("a"); err != nil {
		t.Fatal(err)
	}
	if err := put("x/y"); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name string
		err  error
		code string
	}{
		{"put under a blob", put("a/b"), airlock.ECONFLICT},
		{"put over a directory", put("x"), airlock.ECONFLICT},
		{"open a directory", func() error { _, _, err := d.Open(ctx, "x"); return err }(), airlock.ENOTFOUND},
		{"open under a blob", func() error { _, _, err := d.Open(ctx, "a/b"); return err }(), airlock.ENOTFOUND},
		{"delete a directory", d.Delete(ctx, "x"), ""},
		{"delete under a blob", d.Delete(ctx, "a/b"), ""},
	}
	for _, tt := range tests {
		if got := airlock.ErrorCode(tt.err); got != tt.code {
			t.Errorf("%s: code %q (%v), want %q", tt.name, got, tt.err, tt.code)
		}
	}
	if b, _ := readBlob(t, d, "x/y"); string(b) != "x/y" {
		t.Errorf("x/y changed: %q", b)
	}
	if b, _ := readBlob(t, d, "a"); string(b) != "a" {
		t.Errorf("a changed: %q", b)
	}
}

func TestSymlinkCannotEscape(t *testing.T) {
	ctx := context.Background()
	d, root := newDir(t)
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("s3cret"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(root, "blobs", "evil")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := d.Open(ctx, "evil/secret"); err == nil {
		t.Error("Open followed a symlink out of the directory")
	}
	if _, err := d.Put(ctx, "evil/planted", strings.NewReader("x")); err == nil {
		t.Error("Put followed a symlink out of the directory")
	}
	if _, err := os.Stat(filepath.Join(outside, "planted")); err == nil {
		t.Error("a file was written outside the directory")
	}
}

func TestNewRemovesStaleTemps(t *testing.T) {
	root := filepath.Join(t.TempDir(), "b")
	d, err := disk.New(disk.Config{Dir: root})
	if err != nil {
		t.Fatal(err)
	}
	d.Close()
	stale := filepath.Join(root, "tmp", "stale")
	fresh := filepath.Join(root, "tmp", "fresh")
	for _, p := range []string{stale, fresh} {
		if err := os.WriteFile(p, []byte("partial"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	old := time.Now().Add(-2 * time.Hour)
	if err := os.Chtimes(stale, old, old); err != nil {
		t.Fatal(err)
	}
	d, err = disk.New(disk.Config{Dir: root})
	if err != nil {
		t.Fatal(err)
	}
	d.Close()
	if _, err := os.Stat(stale); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("stale temp survived: %v", err)
	}
	if _, err := os.Stat(fresh); err != nil {
		t.Errorf("fresh temp (a Put in progress) removed: %v", err)
	}
}

func TestClosedDir(t *testing.T) {
	ctx := context.Background()
	d, _ := newDir(t)
	if _, err := d.Put(ctx, "k", strings.NewReader("v")); err != nil {
		t.Fatal(err)
	}
	d.Close()
	if _, err := d.Put(ctx, "k2", strings.NewReader("v")); err == nil {
		t.Error("Put after Close succeeded")
	}
	if _, _, err := d.Open(ctx, "k"); err == nil {
		t.Error("Open after Close succeeded")
	}
	if err := d.Delete(ctx, "k"); err == nil {
		t.Error("Delete after Close succeeded")
	}
}
