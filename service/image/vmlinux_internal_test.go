package image

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"
)

// testELF is a minimal x86-64 executable whose one program header is a
// PT_NOTE segment holding a note of owner and type.
func testELF(owner string, typ uint32) []byte {
	le := binary.LittleEndian
	var note bytes.Buffer
	name := append([]byte(owner), 0)
	binary.Write(&note, le, [3]uint32{uint32(len(name)), 4, typ})
	note.Write(name)
	for note.Len()%4 != 0 {
		note.WriteByte(0)
	}
	note.Write([]byte{1, 2, 3, 4})
	const ehsize, phsize = 64, 56
	b := make([]byte, ehsize+phsize)
	copy(b, "\x7fELF\x02\x01\x01")
	le.PutUint16(b[16:], 2)  // ET_EXEC
	le.PutUint16(b[18:], 62) // EM_X86_64
	le.PutUint32(b[20:], 1)  // EV_CURRENT
	le.PutUint64(b[32:], 64) // e_phoff
	le.PutUint16(b[52:], 64) // e_ehsize
	le.PutUint16(b[54:], 56) // e_phentsize
	le.PutUint16(b[56:], 1)  // e_phnum
	ph := b[ehsize:]
	le.PutUint32(ph[0:], 4) // PT_NOTE
	le.PutUint64(ph[8:], ehsize+phsize)
	le.PutUint64(ph[32:], uint64(note.Len()))
	le.PutUint64(ph[40:], uint64(note.Len()))
	return append(b, note.Bytes()...)
}

// testBzImage wraps payload in a bzImage header of boot protocol 2.15
// with two setup sectors.
func testBzImage(payload []byte) []byte {
	const setupSects = 2
	b := make([]byte, (setupSects+1)*512+100)
	b[0x1f1] = setupSects
	copy(b[0x202:], "HdrS")
	binary.LittleEndian.PutUint16(b[0x206:], 0x020f)
	binary.LittleEndian.PutUint32(b[0x248:], 100)
	binary.LittleEndian.PutUint32(b[0x24c:], uint32(len(payload)))
	b = append(b, payload...)
	return append(b, 0xde, 0xad, 0xbe, 0xef) // what follows the payload in a real one
}

func gz(t *testing.T, b []byte) []byte {
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	w.Write(b)
	w.Close()
	return buf.Bytes()
}

func zst(t *testing.T, b []byte) []byte {
	e, err := zstd.NewWriter(nil)
	if err != nil {
		t.Fatal(err)
	}
	return e.EncodeAll(b, nil)
}

func TestExtractKernelELF(t *testing.T) {
	pvh := testELF("Xen", xenElfnotePhys32Entry)
	for _, c := range []struct {
		name    string
		bzImage []byte
		want    string // "" = extracted
	}{
		{"gzip", testBzImage(gz(t, pvh)), ""},
		{"zstd", testBzImage(zst(t, pvh)), ""},
		{"no PVH note", testBzImage(gz(t, testELF("Linux", 1))), "no PVH entry"},
		{"Xen note of another type", testBzImage(gz(t, testELF("Xen", 17))), "no PVH entry"},
		{"not an ELF", testBzImage(gz(t, []byte("MZ not a kernel"))), "decompressed kernel"},
		{"unknown compression", testBzImage([]byte("BZh91AY&SY")), "unknown method"},
		{"corrupt gzip", testBzImage(append([]byte{0x1f, 0x8b}, bytes.Repeat([]byte{0xff}, 40)...)), "gzip"},
		{"no header", append(make([]byte, 0x300), pvh...), "not a bzImage"},
		{"old protocol", func() []byte {
			b := testBzImage(gz(t, pvh))
			binary.LittleEndian.PutUint16(b[0x206:], 0x0207)
			return b
		}(), "want 2.08"},
		{"payload past the end", func() []byte {
			b := testBzImage(gz(t, pvh))
			binary.LittleEndian.PutUint32(b[0x24c:], 1<<30)
			return b
		}(), "outside the file"},
		{"truncated", testBzImage(gz(t, pvh))[:0x210], "not a bzImage"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			src, dst := filepath.Join(dir, "vmlinuz"), filepath.Join(dir, "vmlinux")
			if err := os.WriteFile(src, c.bzImage, 0o644); err != nil {
				t.Fatal(err)
			}
			err := extractKernelELF(context.Background(), src, dst)
			if c.want != "" {
				if err == nil || !strings.Contains(err.Error(), c.want) {
					t.Fatalf("err = %v, want one saying %q", err, c.want)
				}
				if _, err := os.Stat(dst); err == nil {
					t.Errorf("a refused kernel left %s", dst)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(dst)
			if err != nil || !bytes.Equal(got, pvh) {
				t.Fatalf("extracted %d bytes (%v), want the %d-byte ELF", len(got), err, len(pvh))
			}
			if fi, _ := os.Stat(dst); fi.Mode().Perm() != 0o444 {
				t.Errorf("mode %v, want read-only", fi.Mode())
			}
		})
	}
}

// FuzzExtractKernelELF feeds arbitrary files to the bzImage reader and the
// ELF check: an error or an ELF with the PVH note, never a crash. (The
// decompressors are the libraries' and bounded by maxKernelELF; a
// compressed bomb is slow, not unsafe, so they are left out here.)
func FuzzExtractKernelELF(f *testing.F) {
	f.Add(testBzImage(gz(nil, testELF("Xen", xenElfnotePhys32Entry))))
	f.Add(testBzImage(testELF("Xen", xenElfnotePhys32Entry)))
	f.Add([]byte("HdrS"))
	f.Fuzz(func(t *testing.T, b []byte) {
		payload, err := bzImagePayload(b)
		if err != nil {
			return
		}
		checkPVH(payload)
		hasNote(payload, "Xen", xenElfnotePhys32Entry, binary.LittleEndian)
	})
}
