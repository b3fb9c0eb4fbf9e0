package agent_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestMkdirMoveRemoveAll(t *testing.T) {
	h := start(t)

	info, err := h.c.Mkdir(h.ctx(5*time.Second), "d/e/f")
	if err != nil || info.Name != "f" || !info.IsDir {
		t.Fatalf("Mkdir d/e/f: %+v, %v", info, err)
	}
	if fi, err := os.Stat(filepath.Join(h.ws, "d", "e", "f")); err != nil || !fi.IsDir() {
		t.Fatalf("on disk: %v, %v", fi, err)
	}
	if _, err := h.c.Mkdir(h.ctx(5*time.Second), "d/e/f"); remoteCode(t, err) != "exists" {
		t.Fatalf("Mkdir again: %v, want exists", err)
	}
	if _, err := h.c.Mkdir(h.ctx(5*time.Second), "/workspace"); remoteCode(t, err) != "exists" {
		t.Fatalf("Mkdir of the root: %v, want exists", err)
	}
	if err := h.put("d/file", 0, []byte("x")); err != nil {
		t.Fatal(err)
	}
	if _, err := h.c.Mkdir(h.ctx(5*time.Second), "d/file"); remoteCode(t, err) != "invalid" {
		t.Fatalf("Mkdir over a file: %v, want invalid", err)
	}

	// Move a file into a directory that does not exist yet.
	info, err = h.c.Move(h.ctx(5*time.Second), "d/file", "x/y/moved")
	if err != nil || info.Name != "moved" || info.Size != 1 {
		t.Fatalf("Move: %+v, %v", info, err)
	}
	if b, err := os.ReadFile(filepath.Join(h.ws, "x", "y", "moved")); err != nil || string(b) != "x" {
		t.Fatalf("moved file: %q, %v", b, err)
	}
	if _, err := h.c.Move(h.ctx(5*time.Second), "nope", "x/z"); remoteCode(t, err) != "not_found" {
		t.Fatalf("Move of a missing file: %v, want not_found", err)
	}
	if _, err := h.c.Move(h.ctx(5*time.Second), "x", "/etc/x"); err == nil {
		t.Fatal("Move out of the roots succeeded")
	}

	// A symlink on the way is refused, inside the tree it is removed, not
	// followed.
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "keep"), []byte("k"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(h.ws, "d", "link")); err != nil {
		t.Fatal(err)
	}
	if _, err := h.c.Move(h.ctx(5*time.Second), "d/link/keep", "stolen"); remoteCode(t, err) != "refused" {
		t.Fatalf("Move through a symlink: %v, want refused", err)
	}
	if err := h.c.RemoveAll(h.ctx(5*time.Second), "d/link/keep"); remoteCode(t, err) != "refused" {
		t.Fatalf("RemoveAll through a symlink: %v, want refused", err)
	}
	if err := h.put("d/e/f/g/deep.txt", 0, []byte("deep")); err != nil {
		t.Fatal(err)
	}
	if err := h.c.RemoveAll(h.ctx(5*time.Second), "d"); err != nil {
		t.Fatalf("RemoveAll d: %v", err)
	}
	if _, err := os.Lstat(filepath.Join(h.ws, "d")); !os.IsNotExist(err) {
		t.Fatalf("d still there: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(outside, "keep")); err != nil || string(b) != "k" {
		t.Fatalf("the symlink's target was touched: %q, %v", b, err)
	}
	if err := h.c.RemoveAll(h.ctx(5*time.Second), "d"); remoteCode(t, err) != "not_found" {
		t.Fatalf("RemoveAll of a missing path: %v, want not_found", err)
	}
	if err := h.c.RemoveAll(h.ctx(5*time.Second), "x/y/moved"); err != nil {
		t.Fatalf("RemoveAll of a file: %v", err)
	}
	if err := h.c.RemoveAll(h.ctx(5*time.Second), "/workspace"); err == nil {
		t.Fatal("RemoveAll of the root succeeded")
	}
}
