package image_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlockhq/airlock/service/image"
)

func TestDirSize(t *testing.T) {
	dir := t.TempDir()
	mk := func(name string, n int) string {
		p := filepath.Join(dir, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(strings.Repeat("x", n)), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	a := mk("a", 100)
	mk("sub/b", 200)
	if err := os.Link(a, filepath.Join(dir, "sub/a-link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(a, filepath.Join(dir, "a-link2")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("sub/b", filepath.Join(dir, "b-sym")); err != nil {
		t.Fatal(err)
	}
	got, err := image.DirSize(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got != 300 {
		t.Fatalf("DirSize = %d, want 300 (hard links once, symlinks not followed)", got)
	}
}

func TestHumanSize(t *testing.T) {
	for n, want := range map[int64]string{
		0:                          "0 B",
		1023:                       "1023 B",
		1024:                       "1.0 KiB",
		312*1024*1024 + 400*1024:   "312.4 MiB",
		3 * 1024 * 1024 * 1024 / 2: "1.5 GiB",
	} {
		if got := image.HumanSize(n); got != want {
			t.Errorf("HumanSize(%d) = %q, want %q", n, got, want)
		}
	}
}
