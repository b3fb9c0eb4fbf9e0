package agent_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/airlockhq/airlock/agent/protocol"
	"github.com/airlockhq/airlock/internal/testenv/testreq"
)

func (h *harness) put(p string, mode uint32, data []byte) error {
	_, err := h.c.Put(h.ctx(10*time.Second), p, mode, bytes.NewReader(data))
	return err
}

func (h *harness) get(p string, max int64) ([]byte, error) {
	var buf bytes.Buffer
	n, err := h.c.Get(h.ctx(10*time.Second), p, &buf, max)
	if err == nil && n != int64(buf.Len()) {
		h.t.Fatalf("Get %s: reported %d bytes, wrote %d", p, n, buf.Len())
	}
	return buf.Bytes(), err
}

func names(entries []protocol.FileInfo) []string {
	var n []string
	for _, e := range entries {
		n = append(n, e.Name)
	}
	slices.Sort(n)
	return n
}

func TestFilesRoundTrip(t *testing.T) {
	h := start(t)
	big := make([]byte, 3*protocol.MaxPayload+123)
	rand.Read(big)

	n, err := h.c.Put(h.ctx(10*time.Second), "a/b/c.bin", 0o600, bytes.NewReader(big))
	if err != nil || n != int64(len(big)) {
		t.Fatalf("Put: %d, %v", n, err)
	}
	if got, err := h.get("a/b/c.bin", int64(len(big))); err != nil || !bytes.Equal(got, big) {
		t.Fatalf("Get: %d bytes, %v", len(got), err)
	}
	if err := h.put("/workspace/top.txt", 0, []byte("top")); err != nil {
		t.Fatal(err)
	}
	if got, err := h.get("top.txt", 100); err != nil || string(got) != "top" {
		t.Fatalf("Get top.txt: %q, %v", got, err)
	}
	if err := h.put("empty", 0, nil); err != nil {
		t.Fatal(err)
	}
	if got, err := h.get("/workspace/empty", 1); err != nil || len(got) != 0 {
		t.Fatalf("Get empty: %q, %v", got, err)
	}
	// The files are really in the workspace, with the modes asked for.
	fi, err := os.Stat(filepath.Join(h.ws, "a", "b", "c.bin"))
	if err != nil || fi.Mode().Perm() != 0o600 || fi.Size() != int64(len(big)) {
		t.Fatalf("on disk: %v, %v", fi, err)
	}
	if fi, err := os.Stat(filepath.Join(h.ws, "top.txt")); err != nil || fi.Mode().Perm() != 0o644 {
		t.Fatalf("default mode: %v, %v", fi, err)
	}

	// Stat
	info, err := h.c.Stat(h.ctx(5*time.Second), "a/b/c.bin")
	if err != nil {
		t.Fatal(err)
	}
	if info.Name != "c.bin" || info.Size != int64(len(big)) || info.IsDir || fs.FileMode(info.Mode).Perm() != 0o600 || info.MtimeNS == 0 {
		t.Fatalf("Stat file: %+v", info)
	}
	info, err = h.c.Stat(h.ctx(5*time.Second), "a")
	if err != nil || !info.IsDir || info.Name != "a" || !fs.FileMode(info.Mode).IsDir() {
		t.Fatalf("Stat dir: %+v, %v", info, err)
	}
	info, err = h.c.Stat(h.ctx(5*time.Second), ".")
	if err != nil || !info.IsDir || info.Name != "workspace" {
		t.Fatalf("Stat workspace: %+v, %v", info, err)
	}

	// List
	entries, more, err := h.c.List(h.ctx(5*time.Second), ".")
	if err != nil || more {
		t.Fatalf("List: %v, more %v", err, more)
	}
	if got, want := names(entries), []string{"a", "empty", "top.txt"}; !slices.Equal(got, want) {
		t.Fatalf("List .: %v, want %v", got, want)
	}
	entries, _, err = h.c.List(h.ctx(5*time.Second), "/workspace/a")
	if err != nil || len(entries) != 1 || entries[0].Name != "b" || !entries[0].IsDir {
		t.Fatalf("List a: %+v, %v", entries, err)
	}
	entries, _, err = h.c.List(h.ctx(5*time.Second), "a/b")
	if err != nil || len(entries) != 1 || entries[0].Name != "c.bin" || entries[0].Size != int64(len(big)) {
		t.Fatalf("List a/b: %+v, %v", entries, err)
	}

	// Overwrite replaces the file.
	if err := h.put("top.txt", 0, []byte("replaced")); err != nil {
		t.Fatal(err)
	}
	if got, _ := h.get("top.txt", 100); string(got) != "replaced" {
		t.Fatalf("after overwrite: %q", got)
	}
	// A directory cannot be replaced by a file.
	if err := h.put("a", 0, []byte("x")); err == nil {
		t.Fatal("Put over a directory succeeded")
	}

	// Remove
	if err := h.c.Remove(h.ctx(5*time.Second), "a/b"); err == nil {
		t.Fatal("removed a non-empty directory")
	}
	if err := h.c.Remove(h.ctx(5*time.Second), "a/b/c.bin"); err != nil {
		t.Fatal(err)
	}
	if err := h.c.Remove(h.ctx(5*time.Second), "a/b"); err != nil {
		t.Fatal(err)
	}
	if _, err := h.c.Stat(h.ctx(5*time.Second), "a/b"); remoteCode(t, err) != "not_found" {
		t.Fatalf("Stat removed: %v", err)
	}
	if _, err := h.get("a/b/c.bin", 10); remoteCode(t, err) != "not_found" {
		t.Fatalf("Get removed: %v", err)
	}
	if err := h.c.Remove(h.ctx(5*time.Second), "a/b"); remoteCode(t, err) != "not_found" {
		t.Fatalf("Remove twice: %v", err)
	}
	if _, _, err := h.c.List(h.ctx(5*time.Second), "missing"); remoteCode(t, err) != "not_found" {
		t.Fatalf("List missing: %v", err)
	}
	noTempFiles(t, h.ws)
}

func TestFilesRootsProtected(t *testing.T) {
	h := start(t)
	for _, p := range []string{".", "/workspace", "/workspace/", "./", "/tmp"} {
		if err := h.put(p, 0, []byte("x")); err == nil {
			t.Errorf("Put %q succeeded", p)
		}
		if err := h.c.Remove(h.ctx(5*time.Second), p); err == nil {
			t.Errorf("Remove %q succeeded", p)
		}
	}
	if _, err := os.Stat(h.ws); err != nil {
		t.Fatalf("workspace: %v", err)
	}
	h.healthy()
}

func TestPutRefuses(t *testing.T) {
	h := start(t)
	outside := t.TempDir()
	secret := filepath.Join(outside, "secret")
	if err := os.WriteFile(secret, []byte("secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, l := range []struct{ name, target string }{
		{"link", outside},
		{"flink", secret},
		{"dangling", filepath.Join(outside, "new")},
		{"inside", "."}, // even a link that stays inside is refused
	} {
		if err := os.Symlink(l.target, filepath.Join(h.ws, l.name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(h.ws, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(h.ws, "d", "link2")); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{
		"../x", "a/../../x", "..", "/etc/x", "/etc/passwd", "/", "/workspace/../x",
		"/workspacex", "", "a\x00b", strings.Repeat("a", protocol.MaxPathBytes+1),
		"link/x", "link/sub/x", "flink", "dangling", "link", "d/link2/x", "inside/x",
	} {
		err := h.put(p, 0, []byte("pwned"))
		if err == nil {
			t.Errorf("Put %q succeeded", p)
			continue
		}
		var re *protocol.RemoteError
		if !errors.As(err, &re) {
			t.Errorf("Put %q: got %v, want an agent error", p, err)
		}
	}
	// Nothing reached the outside directory, and the secret is intact.
	entries, _ := os.ReadDir(outside)
	if len(entries) != 1 || entries[0].Name() != "secret" {
		t.Errorf("outside directory now holds %v", entries)
	}
	if b, _ := os.ReadFile(secret); string(b) != "secret" {
		t.Errorf("secret now %q", b)
	}
	if _, err := os.Lstat(filepath.Join(h.ws, "x")); err == nil {
		t.Error("a refused put left a file")
	}
	noTempFiles(t, h.ws)
	h.healthy()
}

func TestGetRefuses(t *testing.T) {
	h := start(t)
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(h.ws, "real"), []byte("real"), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, target := range map[string]string{
		"out":    filepath.Join(outside, "secret"),
		"in":     filepath.Join(h.ws, "real"),
		"rel":    "real",
		"outdir": outside,
	} {
		if err := os.Symlink(target, filepath.Join(h.ws, name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := syscall.Mkfifo(filepath.Join(h.ws, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(h.ws, "dir"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"out", "in", "rel", "outdir/secret", "fifo", "dir", ".", "../x", "/etc/passwd", "missing"} {
		got, err := h.get(p, 1<<20)
		if err == nil {
			t.Errorf("Get %q succeeded with %q", p, got)
			continue
		}
		if errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Get %q blocked", p)
		}
		if len(got) != 0 {
			t.Errorf("Get %q wrote %q", p, got)
		}
	}
	for _, p := range []string{"out", "outdir"} {
		// Stat and List do not follow links either.
		if info, err := h.c.Stat(h.ctx(5*time.Second), p); err == nil {
			t.Errorf("Stat %q followed to %+v", p, info)
		}
	}
	if _, _, err := h.c.List(h.ctx(5*time.Second), "outdir"); err == nil {
		t.Error("List followed a symlink out of the workspace")
	}
	h.healthy()
}

func TestGetMax(t *testing.T) {
	h := start(t)
	data := bytes.Repeat([]byte("0123456789"), 10)
	if err := h.put("f", 0, data); err != nil {
		t.Fatal(err)
	}
	if _, err := h.get("f", 99); remoteCode(t, err) != "too_large" {
		t.Fatalf("Get with max 99: %v", err)
	}
	if got, err := h.get("f", 100); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("Get with max 100: %d bytes, %v", len(got), err)
	}
	if got, err := h.get("f", 1<<40); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("Get with a large max: %d bytes, %v", len(got), err)
	}
	h.healthy()
}

// failingReader yields some data, then an error.
type failingReader struct {
	data []byte
}

func (r *failingReader) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, errors.New("reader failed")
	}
	n := copy(p, r.data)
	r.data = r.data[n:]
	return n, nil
}

func TestPutAbortLeavesNothing(t *testing.T) {
	h := start(t)
	if err := h.put("keep", 0, []byte("old")); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"new", "keep", "deep/er/new"} {
		_, err := h.c.Put(h.ctx(5*time.Second), p, 0, &failingReader{data: make([]byte, protocol.MaxPayload+5)})
		if err == nil || !strings.Contains(err.Error(), "reader failed") {
			t.Fatalf("Put %s: got %v, want the reader's error", p, err)
		}
	}
	h.healthy() // the agent has handled the aborts once it answers this
	for _, p := range []string{"new", "deep/er/new"} {
		if _, err := os.Lstat(filepath.Join(h.ws, p)); err == nil {
			t.Errorf("aborted put left %s", p)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(h.ws, "keep")); string(b) != "old" {
		t.Errorf("aborted put changed keep to %q", b)
	}
	noTempFiles(t, h.ws)
}

func TestPutCancelLeavesNothing(t *testing.T) {
	h := start(t)
	ctx, cancel := context.WithCancel(context.Background())
	r := readerFunc(func(p []byte) (int, error) {
		cancel() // cancelled while the upload is under way
		return copy(p, "data"), nil
	})
	if _, err := h.c.Put(ctx, "f", 0, r); !errors.Is(err, context.Canceled) {
		t.Fatalf("Put: got %v, want Canceled", err)
	}
	h.healthy()
	if _, err := os.Lstat(filepath.Join(h.ws, "f")); err == nil {
		t.Error("cancelled put left its file")
	}
	noTempFiles(t, h.ws)
}

type readerFunc func([]byte) (int, error)

func (f readerFunc) Read(p []byte) (int, error) { return f(p) }

// A connection lost during an upload leaves no temporary file.
func TestPutConnectionLostLeavesNothing(t *testing.T) {
	h := start(t)
	started := make(chan struct{})
	release := make(chan struct{})
	var once bool
	r := readerFunc(func(p []byte) (int, error) {
		if !once {
			once = true
			close(started)
			return copy(p, "partial"), nil
		}
		<-release
		return 0, io.EOF
	})
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.c.Put(context.Background(), "f", 0, r)
	}()
	<-started
	testreq.Eventually(t, 5*time.Second, "the agent to make its temporary file", func() bool {
		m, _ := filepath.Glob(filepath.Join(h.ws, ".airlock-put-*"))
		return len(m) > 0
	})
	h.host.Close()
	select {
	case err := <-h.served:
		h.served <- err // for the cleanup
	case <-time.After(5 * time.Second):
		t.Fatal("Serve did not return when the connection closed")
	}
	close(release)
	<-done
	noTempFiles(t, h.ws)
	if _, err := os.Lstat(filepath.Join(h.ws, "f")); err == nil {
		t.Error("interrupted put left its file")
	}
}

func TestListTruncated(t *testing.T) {
	h := start(t)
	dir := filepath.Join(h.ws, "many")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range protocol.MaxListEntries + 5 {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%04d", i)), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	entries, more, err := h.c.List(h.ctx(10*time.Second), "many")
	if err != nil {
		t.Fatal(err)
	}
	if !more || len(entries) != protocol.MaxListEntries {
		t.Fatalf("List: %d entries, more %v; want %d and more", len(entries), more, protocol.MaxListEntries)
	}
}

// Names the protocol cannot carry faithfully (JSON turns invalid UTF-8
// into U+FFFD, three bytes for each bad one) are left out of a listing:
// a program must not be able to fail the host's List, or make it report
// names that do not exist, by creating such a file.
func TestListOddNames(t *testing.T) {
	h := start(t)
	good := []string{"ok", "with space", "new\nline", "\u00e9t\u00e9", strings.Repeat("n", 255)}
	bad := []string{"bad\xff", strings.Repeat("\xff", 200)}
	for _, n := range append(slices.Clone(good), bad...) {
		if err := os.WriteFile(filepath.Join(h.ws, n), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	entries, _, err := h.c.List(h.ctx(5*time.Second), ".")
	if err != nil {
		t.Fatalf("List failed because of odd names: %v", err)
	}
	slices.Sort(good)
	if got := names(entries); !slices.Equal(got, good) {
		t.Fatalf("List: %q, want %q", got, good)
	}
}
