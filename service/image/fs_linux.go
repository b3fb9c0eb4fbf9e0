package image

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/airlockhq/airlock/internal/mountinfo"
)

// lockImages takes the exclusive build lock of imagesDir, waiting for it
// (and saying so on w) while ctx allows. The returned func releases it.
func lockImages(ctx context.Context, imagesDir string, w io.Writer) (func(), error) {
	if err := os.MkdirAll(imagesDir, 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(imagesDir, ".lock"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	said := false
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { f.Close() }, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", f.Name(), err)
		}
		if !said {
			fmt.Fprintf(w, "waiting for another image build to finish (%s)\n", f.Name())
			said = true
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// mountsUnder returns the mount points at or below dir, deepest first.
func mountsUnder(dir string) ([]string, error) {
	ms, err := mountinfo.Self()
	if err != nil {
		return nil, err
	}
	out := mountinfo.Under(ms, dir)
	mountinfo.DeepestFirst(out)
	return out, nil
}

// removeTree removes dir after detaching whatever a killed debootstrap
// left mounted inside it (proc, sys, dev/pts). It refuses to remove a
// tree that still has mounts in it.
func removeTree(dir string) error {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	mps, err := mountsUnder(dir)
	if err != nil {
		return err
	}
	for _, mp := range mps {
		if err := syscall.Unmount(mp, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) {
			return fmt.Errorf("unmount %s: %w", mp, err)
		}
	}
	if len(mps) > 0 {
		if left, err := mountsUnder(dir); err != nil || len(left) > 0 {
			return fmt.Errorf("refusing to remove %s: still mounted: %v (%v)", dir, left, err)
		}
	}
	return os.RemoveAll(dir)
}

// inode identifies a file for counting hard links once.
type inode struct{ dev, ino uint64 }

// fileInode returns fi's inode and whether it has more than one link.
func fileInode(fi fs.FileInfo) (inode, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return inode{}, false
	}
	return inode{uint64(st.Dev), st.Ino}, st.Nlink > 1
}

// fileLinks returns a file's inode and its number of hard links.
func fileLinks(fi fs.FileInfo) (inode, uint64) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return inode{}, 1
	}
	return inode{uint64(st.Dev), st.Ino}, uint64(st.Nlink)
}

// syncAll flushes every filesystem, so that a directory renamed into
// place afterwards is complete on disk even after a power cut.
func syncAll() { syscall.Sync() }
