package image

import (
	"bytes"
	"strconv"
	"testing"
)

// readNewc parses a newc archive the way the kernel's initramfs unpacker
// does: 110-byte headers, names and data each padded to 4 bytes.
func readNewc(t *testing.T, b []byte) map[string]struct {
	mode, major, minor uint64
	data               string
} {
	t.Helper()
	out := map[string]struct {
		mode, major, minor uint64
		data               string
	}{}
	off := 0
	field := func(i int) uint64 {
		v, err := strconv.ParseUint(string(b[off+6+8*i:off+6+8*i+8]), 16, 32)
		if err != nil {
			t.Fatalf("bad header field %d at %d: %v", i, off, err)
		}
		return v
	}
	for {
		if off+110 > len(b) || string(b[off:off+6]) != "070701" {
			t.Fatalf("no newc header at %d", off)
		}
		mode, size, major, minor, nameSize := field(1), field(6), field(9), field(10), field(11)
		name := string(b[off+110 : off+110+int(nameSize)-1])
		if b[off+110+int(nameSize)-1] != 0 {
			t.Fatalf("name %q not NUL-terminated", name)
		}
		off = (off + 110 + int(nameSize) + 3) &^ 3
		data := string(b[off : off+int(size)])
		off = (off + int(size) + 3) &^ 3
		if name == "TRAILER!!!" {
			if off != len(b) {
				t.Fatalf("%d bytes after the trailer", len(b)-off)
			}
			return out
		}
		out[name] = struct {
			mode, major, minor uint64
			data               string
		}{mode, major, minor, data}
	}
}

func TestCpioWriter(t *testing.T) {
	var buf bytes.Buffer
	w := &cpioWriter{w: &buf}
	w.Dir("dev", 0o755)
	w.CharDev("dev/console", 0o600, 5, 1)
	w.File("init", 0o755, []byte("#!binary"))
	w.File("odd", 0o644, []byte("abcde")) // a size that needs padding
	w.Symlink("link", "init")
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	got := readNewc(t, buf.Bytes())
	tests := []struct {
		name         string
		mode         uint64
		major, minor uint64
		data         string
	}{
		{"dev", cpioDir | 0o755, 0, 0, ""},
		{"dev/console", cpioChr | 0o600, 5, 1, ""},
		{"init", cpioReg | 0o755, 0, 0, "#!binary"},
		{"odd", cpioReg | 0o644, 0, 0, "abcde"},
		{"link", cpioLink | 0o777, 0, 0, "init"},
	}
	for _, tt := range tests {
		e, ok := got[tt.name]
		if !ok {
			t.Errorf("%s missing", tt.name)
			continue
		}
		if e.mode != tt.mode || e.major != tt.major || e.minor != tt.minor || e.data != tt.data {
			t.Errorf("%s: mode %o dev %d:%d data %q, want mode %o dev %d:%d data %q", tt.name, e.mode, e.major, e.minor, e.data, tt.mode, tt.major, tt.minor, tt.data)
		}
	}
	if len(got) != len(tests) {
		t.Errorf("%d entries, want %d", len(got), len(tests))
	}
}

func TestCpioWriterRefusesAbsoluteNames(t *testing.T) {
	var buf bytes.Buffer
	w := &cpioWriter{w: &buf}
	w.File("/etc/passwd", 0o644, nil)
	if err := w.Close(); err == nil {
		t.Fatal("an absolute name was written")
	}
}

func TestVersionLess(t *testing.T) {
	tests := []struct {
		a, b string
		less bool
	}{
		{"6.1.0-57-amd64_6.1.192-3", "6.1.0-58-amd64_6.1.193-1", true},
		{"6.1.0-9-amd64_6.1.27-1", "6.1.0-10-amd64_6.1.38-1", true},
		{"6.1.0-10-amd64_6.1.38-1", "6.1.0-9-amd64_6.1.27-1", false},
		{"6.12.0-1-amd64_6.12.5-1", "6.1.0-57-amd64_6.1.192-3", false},
		{"6.1.0-57-amd64_6.1.192-3", "6.1.0-57-amd64_6.1.192-3", false},
	}
	for _, tt := range tests {
		if got := versionLess(tt.a, tt.b); got != tt.less {
			t.Errorf("versionLess(%q, %q) = %v, want %v", tt.a, tt.b, got, tt.less)
		}
	}
}
