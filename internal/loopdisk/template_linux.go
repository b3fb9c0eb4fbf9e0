package loopdisk

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"
)

// Templates formats one disk image per size, once, and hands out sparse
// copies of it: copying the few hundred KiB mkfs wrote takes well under a
// millisecond, running mkfs.ext4 several. Copies share the template's file
// system UUID, which nothing here uses.
type Templates struct {
	// Dir holds the templates; it is created if missing.
	Dir string

	mu    sync.Mutex
	ready map[int64]bool
}

// Create writes a freshly formatted disk image of sizeBytes at image,
// which must not exist.
func (t *Templates) Create(ctx context.Context, image string, sizeBytes int64) error {
	tpl, err := t.template(ctx, sizeBytes)
	if err != nil {
		return err
	}
	return copySparse(tpl, image, sizeBytes)
}

// template returns the path of the template of sizeBytes, formatting it
// the first time.
func (t *Templates) template(ctx context.Context, sizeBytes int64) (string, error) {
	path := filepath.Join(t.Dir, "ext4-"+strconv.FormatInt(sizeBytes, 10)+".img")
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ready[sizeBytes] {
		return path, nil
	}
	if err := os.MkdirAll(t.Dir, 0o700); err != nil {
		return "", fmt.Errorf("loopdisk: %w", err)
	}
	// A template left by an earlier run may be half written: make it anew.
	tmp := path + ".tmp"
	os.Remove(tmp)
	if err := Format(ctx, tmp, sizeBytes); err != nil {
		os.Remove(tmp)
		return "", err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("loopdisk: %w", err)
	}
	if t.ready == nil {
		t.ready = map[int64]bool{}
	}
	t.ready[sizeBytes] = true
	return path, nil
}

// copySparse copies the data extents of src to a new file dst of size
// bytes, leaving the holes as holes.
func copySparse(src, dst string, size int64) (err error) {
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("loopdisk: template: %w", err)
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("loopdisk: disk image: %w", err)
	}
	defer func() {
		if cerr := out.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("loopdisk: disk image: %w", cerr)
		}
		if err != nil {
			os.Remove(dst)
		}
	}()
	if err := out.Truncate(size); err != nil {
		return fmt.Errorf("loopdisk: disk image: %w", err)
	}
	ifd := int(in.Fd())
	var off int64
	for off < size {
		data, err := unix.Seek(ifd, off, unix.SEEK_DATA)
		if errors.Is(err, unix.ENXIO) {
			break // no data after off
		}
		if err != nil {
			return fmt.Errorf("loopdisk: template: %w", err)
		}
		hole, err := unix.Seek(ifd, data, unix.SEEK_HOLE)
		if err != nil {
			return fmt.Errorf("loopdisk: template: %w", err)
		}
		if hole > size {
			hole = size
		}
		if err := copyRange(in, out, data, hole-data); err != nil {
			return err
		}
		off = hole
	}
	return nil
}

// copyRange copies n bytes at off from in to the same offset of out, in
// the kernel where it can.
func copyRange(in, out *os.File, off, n int64) error {
	roff, woff := off, off
	for n > 0 {
		k, err := unix.CopyFileRange(int(in.Fd()), &roff, int(out.Fd()), &woff, int(n), 0)
		if err != nil || k == 0 {
			// Not supported between these files: copy by hand.
			_, err := io.Copy(io.NewOffsetWriter(out, woff), io.NewSectionReader(in, roff, n))
			if err != nil {
				return fmt.Errorf("loopdisk: copy template: %w", err)
			}
			return nil
		}
		n -= int64(k)
	}
	return nil
}

// CopySparse copies the disk image src to a new file dst of the same
// size, data extents only (holes stay holes).
func CopySparse(src, dst string) error {
	fi, err := os.Stat(src)
	if err != nil {
		return fmt.Errorf("loopdisk: %w", err)
	}
	return copySparse(src, dst, fi.Size())
}
