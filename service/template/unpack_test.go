package template

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/airlockhq/airlock"
)

// tarEntry is one entry of a test layer.
type tarEntry struct {
	name, link string
	typ        byte
	body       string
	size       int64 // header size when body is empty (a bomb's claim)
}

func layerOf(t testing.TB, es ...tarEntry) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range es {
		h := &tar.Header{Name: e.name, Linkname: e.link, Typeflag: e.typ, Mode: 0o644, Size: int64(len(e.body))}
		if e.typ == 0 {
			h.Typeflag = tar.TypeReg
		}
		if h.Typeflag == tar.TypeDir {
			h.Mode = 0o755
		}
		if h.Typeflag != tar.TypeReg {
			h.Size = 0
		}
		if e.size > 0 {
			h.Size = e.size
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if e.body != "" {
			tw.Write([]byte(e.body))
		} else if e.size > 0 {
			tw.Write(make([]byte, e.size))
		}
	}
	tw.Close()
	return buf.Bytes()
}

// sandboxDir makes outside/ (must stay untouched) beside root/.
func sandboxDir(t *testing.T) (root, outside string) {
	d := t.TempDir()
	root, outside = filepath.Join(d, "root"), filepath.Join(d, "outside")
	for _, p := range []string{root, outside} {
		if err := os.Mkdir(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(outside, "keep"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	return root, outside
}

func apply(t *testing.T, root string, maxBytes, maxFiles int64, layers ...[]byte) error {
	t.Helper()
	u, err := newUnpacker(root, maxBytes, maxFiles, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	for _, l := range layers {
		if err := u.layer(bytes.NewReader(l)); err != nil {
			return err
		}
	}
	return nil
}

func untouched(t *testing.T, outside string) {
	t.Helper()
	ents, err := os.ReadDir(outside)
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != 1 || ents[0].Name() != "keep" {
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		t.Fatalf("something was written outside the root: %v", names)
	}
	if b, _ := os.ReadFile(filepath.Join(outside, "keep")); string(b) != "x" {
		t.Fatalf("outside/keep was changed: %q", b)
	}
}

// TestUnpackHostile: each hostile archive is refused with its problem
// type, and nothing is written outside the root.
func TestUnpackHostile(t *testing.T) {
	cases := []struct {
		name     string
		layers   func(outside string) [][]byte
		maxBytes int64
		maxFiles int64
		problem  string
	}{
		{"symlink escape (relative)", func(string) [][]byte {
			return [][]byte{layerOf(t, tarEntry{name: "evil", typ: tar.TypeSymlink, link: "../outside"}, tarEntry{name: "evil/pwned", body: "x"})}
		}, 0, 0, ProblemArchiveRefused},
		{"symlink escape (absolute)", func(outside string) [][]byte {
			return [][]byte{layerOf(t, tarEntry{name: "evil", typ: tar.TypeSymlink, link: outside}, tarEntry{name: "evil/pwned", body: "x"})}
		}, 0, 0, ProblemArchiveRefused},
		{"symlink escape across layers", func(outside string) [][]byte {
			return [][]byte{
				layerOf(t, tarEntry{name: "etc", typ: tar.TypeSymlink, link: "../../outside"}),
				layerOf(t, tarEntry{name: "etc/passwd", body: "root::0:0::/:/bin/sh\n"}),
			}
		}, 0, 0, ProblemArchiveRefused},
		{"hard link escape", func(outside string) [][]byte {
			return [][]byte{layerOf(t, tarEntry{name: "link", typ: tar.TypeLink, link: "../outside/keep"})}
		}, 0, 0, ProblemArchiveRefused},
		{"hard link through a symlink", func(outside string) [][]byte {
			return [][]byte{layerOf(t, tarEntry{name: "up", typ: tar.TypeSymlink, link: "/"}, tarEntry{name: "link", typ: tar.TypeLink, link: "up/../outside/keep"})}
		}, 0, 0, ProblemArchiveRefused},
		{"dot-dot entry", func(string) [][]byte {
			return [][]byte{layerOf(t, tarEntry{name: "a/../../outside/pwned", body: "x"})}
		}, 0, 0, ProblemArchiveRefused},
		{"absolute entry", func(outside string) [][]byte {
			return [][]byte{layerOf(t, tarEntry{name: filepath.Join(outside, "pwned"), body: "x"})}
		}, 0, 0, ProblemArchiveRefused},
		{"whiteout escape", func(string) [][]byte {
			return [][]byte{layerOf(t, tarEntry{name: "../outside/.wh.keep", body: ""})}
		}, 0, 0, ProblemArchiveRefused},
		{"decompression bomb (bytes)", func(string) [][]byte {
			return [][]byte{layerOf(t, tarEntry{name: "big", size: 4 << 20})}
		}, 1 << 20, 0, ProblemTooLarge},
		{"too many files", func(string) [][]byte {
			var es []tarEntry
			for i := 0; i < 50; i++ {
				es = append(es, tarEntry{name: "f" + string(rune('a'+i%26)) + string(rune('a'+i/26)), body: "x"})
			}
			return [][]byte{layerOf(t, es...)}
		}, 0, 20, ProblemTooManyFiles},
		{"not a tar", func(string) [][]byte { return [][]byte{bytes.Repeat([]byte("junk"), 300)} }, 0, 0, ProblemArchiveRefused},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			root, outside := sandboxDir(t)
			err := apply(t, root, tc.maxBytes, tc.maxFiles, tc.layers(outside)...)
			var ae *airlock.Error
			if !errors.As(err, &ae) || ae.Type != tc.problem {
				t.Fatalf("err = %v, want problem %s", err, tc.problem)
			}
			if ae.Message == "" {
				t.Fatal("the problem has no message")
			}
			untouched(t, outside)
		})
	}
}

// TestUnpackDevicesDropped: device nodes and FIFOs are not made.
func TestUnpackDevicesDropped(t *testing.T) {
	root, outside := sandboxDir(t)
	err := apply(t, root, 0, 0, layerOf(t,
		tarEntry{name: "dev/", typ: tar.TypeDir},
		tarEntry{name: "dev/sda", typ: tar.TypeBlock}, tarEntry{name: "dev/mem", typ: tar.TypeChar},
		tarEntry{name: "fifo", typ: tar.TypeFifo}, tarEntry{name: "ok", body: "fine"}))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"dev/sda", "dev/mem", "fifo"} {
		if _, err := os.Lstat(filepath.Join(root, p)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s exists (%v)", p, err)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(root, "ok")); string(b) != "fine" {
		t.Errorf("ok = %q", b)
	}
	untouched(t, outside)
}

// TestUnpackLayers: whiteouts and opaque directories remove lower
// layers' files; hard links inside the root share an inode; relative
// symlinks inside the root are kept and can be written through.
func TestUnpackLayers(t *testing.T) {
	root, outside := sandboxDir(t)
	lower := layerOf(t,
		tarEntry{name: "etc/", typ: tar.TypeDir},
		tarEntry{name: "etc/gone", body: "old"},
		tarEntry{name: "etc/kept", body: "kept"},
		tarEntry{name: "opq/", typ: tar.TypeDir},
		tarEntry{name: "opq/lower", body: "lower"},
		tarEntry{name: "usr/lib/", typ: tar.TypeDir},
		tarEntry{name: "lib", typ: tar.TypeSymlink, link: "usr/lib"},
		tarEntry{name: "bin/tool", body: "tool"},
	)
	upper := layerOf(t,
		tarEntry{name: "etc/.wh.gone"},
		tarEntry{name: "opq/.wh..wh..opq"},
		tarEntry{name: "opq/upper", body: "upper"},
		tarEntry{name: "bin/alias", typ: tar.TypeLink, link: "bin/tool"},
		tarEntry{name: "lib/libx.so", body: "elf"},
	)
	if err := apply(t, root, 0, 0, lower, upper); err != nil {
		t.Fatal(err)
	}
	exists := func(p string) bool { _, err := os.Lstat(filepath.Join(root, p)); return err == nil }
	for p, want := range map[string]bool{"etc/gone": false, "etc/kept": true, "opq/lower": false, "opq/upper": true, "usr/lib/libx.so": true} {
		if exists(p) != want {
			t.Errorf("%s exists = %v, want %v", p, !want, want)
		}
	}
	a, _ := os.Stat(filepath.Join(root, "bin/tool"))
	b, _ := os.Stat(filepath.Join(root, "bin/alias"))
	if a == nil || b == nil || !os.SameFile(a, b) {
		t.Errorf("bin/alias is not a hard link of bin/tool")
	}
	untouched(t, outside)
}

// FuzzUnpack: whatever the layer, the unpacker never writes outside the
// root and never panics.
func FuzzUnpack(f *testing.F) {
	f.Add(layerOf(f, tarEntry{name: "a", typ: tar.TypeSymlink, link: "../x"}, tarEntry{name: "a/b", body: "x"}))
	f.Add(layerOf(f, tarEntry{name: "l", typ: tar.TypeLink, link: "../x"}))
	f.Add(layerOf(f, tarEntry{name: "d/", typ: tar.TypeDir}, tarEntry{name: "d/.wh..wh..opq"}, tarEntry{name: ".wh.d"}))
	f.Fuzz(func(t *testing.T, data []byte) {
		root, outside := sandboxDir(t)
		u, err := newUnpacker(root, 1<<20, 1000, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		defer u.Close()
		u.layer(bytes.NewReader(data))
		untouched(t, outside)
	})
}
