package wsarchive_test

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/airlockhq/airlock/internal/wsarchive"
)

// tree describes every entry under dir: type, mode and content hash or
// link target.
func tree(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(dir, p)
		if rel == "." {
			return nil
		}
		fi, _ := os.Lstat(p)
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			l, _ := os.Readlink(p)
			out[rel] = "link " + l
		case fi.IsDir():
			out[rel] = "dir " + fi.Mode().String()
		case !fi.Mode().IsRegular():
			out[rel] = "other"
		default:
			b, _ := os.ReadFile(p)
			h := sha256.Sum256(b)
			out[rel] = "file " + fi.Mode().Perm().String() + " " + hex.EncodeToString(h[:])
		}
		return nil
	})
	return out
}

func TestRoundTrip(t *testing.T) {
	src := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(filepath.Join(src, "a.txt"), []byte("hello"), 0o640))
	must(os.WriteFile(filepath.Join(src, "run.sh"), []byte("#!/bin/sh\necho hi\n"), 0o755))
	must(os.WriteFile(filepath.Join(src, "empty"), nil, 0o600))
	must(os.MkdirAll(filepath.Join(src, "empty-dir"), 0o700))
	must(os.Mkdir(filepath.Join(src, "sticky"), 0o755))
	must(os.Chmod(filepath.Join(src, "sticky"), 0o777|fs.ModeSticky))
	deep := src
	for i := 0; i < 40; i++ {
		deep = filepath.Join(deep, "d")
	}
	must(os.MkdirAll(deep, 0o755))
	must(os.WriteFile(filepath.Join(deep, "bottom"), bytes.Repeat([]byte{1, 2, 3}, 100000), 0o644))
	must(os.Symlink("a.txt", filepath.Join(src, "link")))
	must(os.Symlink("../../a.txt", filepath.Join(src, "d", "d", "up")))
	must(os.Symlink("/etc/passwd", filepath.Join(src, "abs")))        // left out
	must(os.Symlink("../../outside", filepath.Join(src, "d", "esc"))) // left out
	must(syscall.Mkfifo(filepath.Join(src, "fifo"), 0o644))           // left out
	var buf bytes.Buffer
	st, err := wsarchive.Write(context.Background(), src, &buf, wsarchive.Limits{})
	must(err)
	if st.Skipped != 3 {
		t.Errorf("skipped %d, want 3", st.Skipped)
	}
	dst := t.TempDir()
	st2, err := wsarchive.Extract(context.Background(), &buf, dst, os.Getuid(), os.Getgid(), wsarchive.Limits{})
	must(err)
	if st2.Entries != st.Entries || st2.Bytes != st.Bytes {
		t.Errorf("stats %+v, wrote %+v", st2, st)
	}
	want := tree(t, src)
	delete(want, "abs")
	delete(want, "fifo")
	delete(want, filepath.Join("d", "esc"))
	got := tree(t, dst)
	if len(got) != len(want) {
		t.Errorf("%d entries, want %d", len(got), len(want))
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %q, want %q", k, got[k], v)
		}
	}
}

type entry struct {
	h    tar.Header
	body string
}

func archive(es ...entry) []byte {
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, e := range es {
		h := e.h
		if h.Typeflag == tar.TypeReg {
			h.Size = int64(len(e.body))
		}
		if h.Mode == 0 {
			h.Mode = 0o644
		}
		tw.WriteHeader(&h)
		io.WriteString(tw, e.body)
	}
	tw.Close()
	return b.Bytes()
}

func TestExtractRefuses(t *testing.T) {
	reg := func(name string) entry { return entry{h: tar.Header{Typeflag: tar.TypeReg, Name: name}, body: "x"} }
	link := func(name, target string) entry {
		return entry{h: tar.Header{Typeflag: tar.TypeSymlink, Name: name, Linkname: target}}
	}
	cases := map[string][]byte{
		"absolute path":      archive(reg("/etc/x")),
		"dot dot":            archive(reg("../x")),
		"dot dot inside":     archive(reg("a/../../x")),
		"unclean":            archive(reg("a//b")),
		"absolute link":      archive(link("l", "/etc")),
		"escaping link":      archive(link("a/l", "../../x")),
		"hard link":          archive(entry{h: tar.Header{Typeflag: tar.TypeLink, Name: "h", Linkname: "x"}}),
		"device":             archive(entry{h: tar.Header{Typeflag: tar.TypeChar, Name: "dev"}}),
		"fifo":               archive(entry{h: tar.Header{Typeflag: tar.TypeFifo, Name: "p"}}),
		"duplicate":          archive(reg("x"), reg("x")),
		"file over link":     archive(link("l", "x"), reg("l")),
		"dir over file":      archive(reg("x"), entry{h: tar.Header{Typeflag: tar.TypeDir, Name: "x/"}}),
		"truncated":          archive(entry{h: tar.Header{Typeflag: tar.TypeReg, Name: "x"}, body: strings.Repeat("x", 5000)})[:2000],
		"garbage":            []byte(strings.Repeat("not a tar ", 100)),
		"write through link": archive(link("l", "."), reg("l/../../x")),
		"empty name":         archive(reg("")),
	}
	for name, b := range cases {
		t.Run(name, func(t *testing.T) {
			parent := t.TempDir()
			dst := filepath.Join(parent, "ws")
			os.Mkdir(dst, 0o755)
			_, err := wsarchive.Extract(context.Background(), bytes.NewReader(b), dst, os.Getuid(), os.Getgid(), wsarchive.Limits{})
			if err == nil {
				t.Fatal("extracted")
			}
			if entries, _ := os.ReadDir(parent); len(entries) != 1 {
				t.Errorf("something was written beside the workspace: %v", entries)
			}
		})
	}
	// Limits.
	var es []entry
	for i := 0; i < 20; i++ {
		es = append(es, reg("f"+string(rune('a'+i))))
	}
	if _, err := wsarchive.Extract(context.Background(), bytes.NewReader(archive(es...)), t.TempDir(), os.Getuid(), os.Getgid(), wsarchive.Limits{MaxEntries: 10}); !errors.Is(err, wsarchive.ErrInvalid) {
		t.Errorf("entry limit: %v", err)
	}
	if _, err := wsarchive.Extract(context.Background(), bytes.NewReader(archive(entry{h: tar.Header{Typeflag: tar.TypeReg, Name: "big"}, body: strings.Repeat("x", 100)})), t.TempDir(), os.Getuid(), os.Getgid(), wsarchive.Limits{MaxBytes: 10}); !errors.Is(err, wsarchive.ErrInvalid) {
		t.Errorf("byte limit: %v", err)
	}
}

func FuzzExtract(f *testing.F) {
	f.Add(archive(entry{h: tar.Header{Typeflag: tar.TypeReg, Name: "a"}, body: "x"}))
	f.Add(archive(entry{h: tar.Header{Typeflag: tar.TypeSymlink, Name: "l", Linkname: "a"}}))
	f.Add(archive(entry{h: tar.Header{Typeflag: tar.TypeDir, Name: "d/"}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		parent := t.TempDir()
		dst := filepath.Join(parent, "ws")
		os.Mkdir(dst, 0o755)
		wsarchive.Extract(context.Background(), bytes.NewReader(b), dst, os.Getuid(), os.Getgid(), wsarchive.Limits{MaxBytes: 1 << 20, MaxEntries: 100})
		if entries, _ := os.ReadDir(parent); len(entries) != 1 {
			t.Fatalf("wrote beside the workspace: %v", entries)
		}
	})
}
