package gvisor_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/airlockhq/airlock/backend/gvisor"
)

// A paused sandbox written as a stream reads back the same; no other
// input makes a directory or crashes the reader.
func FuzzReadPaused(f *testing.F) {
	b := &gvisor.Backend{}
	src := f.TempDir()
	os.MkdirAll(filepath.Join(src, "checkpoint"), 0o700)
	os.WriteFile(filepath.Join(src, "checkpoint", "checkpoint.img"), []byte("state"), 0o600)
	disk := make([]byte, 300<<10)
	copy(disk[70<<10:], "data in the second block")
	os.WriteFile(filepath.Join(src, "disk.img"), disk, 0o600)
	var stream bytes.Buffer
	if err := b.WritePaused(context.Background(), src, &stream); err != nil {
		f.Fatal(err)
	}
	dst := filepath.Join(f.TempDir(), "p")
	if err := b.ReadPaused(context.Background(), bytes.NewReader(stream.Bytes()), dst); err != nil {
		f.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(dst, "disk.img")); !bytes.Equal(got, disk) {
		f.Fatal("the disk did not read back")
	}
	if got, _ := os.ReadFile(filepath.Join(dst, "checkpoint", "checkpoint.img")); string(got) != "state" {
		f.Fatal("the checkpoint did not read back")
	}
	f.Add(stream.Bytes())
	f.Add(stream.Bytes()[:len(stream.Bytes())-1])
	f.Add([]byte("ALKPAUSE1\nE"))
	f.Fuzz(func(t *testing.T, in []byte) {
		dir := filepath.Join(t.TempDir(), "p")
		if err := b.ReadPaused(context.Background(), bytes.NewReader(in), dir); err != nil {
			if _, serr := os.Stat(dir); !os.IsNotExist(serr) {
				t.Fatalf("a refused stream left %s", dir)
			}
		}
	})
}
