package dockerfile

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"
)

// linkTree makes dst a copy of the tree src in which every
// non-directory is a hard link to src's: directories are made anew with
// src's mode and owner. Nothing may write into dst's files in place
// afterwards (sandboxes mount it read-only).
func linkTree(ctx context.Context, src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return mkdirLike(p, target)
		}
		return os.Link(p, target)
	})
}

// mkdirLike makes dir (or keeps it) with the mode and owner of like.
func mkdirLike(like, dir string) error {
	fi, err := os.Lstat(like)
	if err != nil {
		return err
	}
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	st := fi.Sys().(*syscall.Stat_t)
	if err := os.Lchown(dir, int(st.Uid), int(st.Gid)); err != nil {
		return err
	}
	return os.Chmod(dir, fi.Mode()&(fs.ModePerm|fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky))
}

// applyLayer applies one layer (an overlay upper directory) to the
// tree dst made by linkTree: whiteouts remove, opaque directories hide
// what was below, everything else replaces what was there (files as
// hard links into the layer). dst is entered only through an os.Root,
// so a symlink an earlier step left in it leads nowhere outside.
func applyLayer(ctx context.Context, layer, dst string) error {
	root, err := os.OpenRoot(dst)
	if err != nil {
		return err
	}
	defer root.Close()
	return filepath.WalkDir(layer, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		rel, _ := filepath.Rel(layer, p)
		if rel == "." {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		st := fi.Sys().(*syscall.Stat_t)
		if isWhiteout(st.Mode, st.Rdev) {
			return root.RemoveAll(rel)
		}
		if cur, err := root.Lstat(rel); err == nil && (!d.IsDir() || !cur.IsDir()) {
			if err := root.RemoveAll(rel); err != nil {
				return err
			}
		}
		if d.IsDir() {
			if isOpaque(p) {
				if err := root.RemoveAll(rel); err != nil {
					return err
				}
			}
			if err := root.Mkdir(rel, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
				return err
			}
			if err := root.Lchown(rel, int(st.Uid), int(st.Gid)); err != nil {
				return err
			}
			return root.Chmod(rel, fi.Mode()&(fs.ModePerm|fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky))
		}
		return linkInto(root, p, rel)
	})
}

// linkInto hard-links the host file src to rel inside root: the parent
// is resolved through the root, the last element is not followed.
func linkInto(root *os.Root, src, rel string) error {
	parent, err := root.Open(filepath.Dir(rel))
	if err != nil {
		return err
	}
	defer parent.Close()
	if err := unix.Linkat(unix.AT_FDCWD, src, int(parent.Fd()), filepath.Base(rel), 0); err != nil {
		return fmt.Errorf("link %s: %w", rel, err)
	}
	return nil
}
