package dockerfile

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
)

// Bounds of an unpacked build context (the upload itself is bounded by
// the template service; these bound what a tar of sparse or repeated
// entries could expand to).
const (
	maxContextUnpackedBytes = 4 << 30
	maxContextFiles         = 200_000
)

// extractContext unpacks the tar at tarPath into the empty directory
// dir, only through an os.Root: absolute names and ".." are refused
// (ErrEscape), and so is anything but directories, regular files,
// symlinks and hard links to files inside. Symlinks are kept as they
// are: the context is only ever read through an os.Root, which refuses
// one that leads out.
func extractContext(tarPath, dir string) error {
	f, err := os.Open(tarPath)
	if err != nil {
		return err
	}
	defer f.Close()
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	tr := tar.NewReader(f)
	var total int64
	files := 0
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%w: the build context is not a tar: %v", ErrInvalid, err)
		}
		files++
		if files > maxContextFiles {
			return fmt.Errorf("%w: the build context has more than %d entries", ErrTooLarge, maxContextFiles)
		}
		name, err := cleanEntry(h.Name)
		if err != nil {
			return err
		}
		if name == "" {
			continue
		}
		if d := path.Dir(name); d != "." {
			if err := root.MkdirAll(d, 0o755); err != nil {
				return contextErr(name, err)
			}
		}
		mode := fs.FileMode(h.Mode).Perm()
		switch h.Typeflag {
		case tar.TypeDir:
			if err := root.MkdirAll(name, 0o755); err != nil {
				return contextErr(name, err)
			}
			if err := root.Chmod(name, mode|0o700); err != nil {
				return contextErr(name, err)
			}
		case tar.TypeReg:
			total += h.Size
			if total > maxContextUnpackedBytes {
				return fmt.Errorf("%w: the build context unpacks to more than %d bytes", ErrTooLarge, int64(maxContextUnpackedBytes))
			}
			root.Remove(name)
			out, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode|0o600)
			if err != nil {
				return contextErr(name, err)
			}
			_, err = io.CopyN(out, tr, h.Size)
			if cerr := out.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return contextErr(name, err)
			}
			if err := root.Chmod(name, mode); err != nil {
				return contextErr(name, err)
			}
		case tar.TypeSymlink:
			root.Remove(name)
			if err := root.Symlink(h.Linkname, name); err != nil {
				return contextErr(name, err)
			}
		case tar.TypeLink:
			target, err := cleanEntry(h.Linkname)
			if err != nil || target == "" {
				return fmt.Errorf("%w: hard link %s -> %s", ErrEscape, h.Name, h.Linkname)
			}
			if fi, err := root.Lstat(target); err != nil || !fi.Mode().IsRegular() {
				return fmt.Errorf("%w: hard link %s must name a file before it in the archive", ErrInvalid, h.Name)
			}
			root.Remove(name)
			if err := root.Link(target, name); err != nil {
				return contextErr(name, err)
			}
		default:
			return fmt.Errorf("%w: %s in the build context is not a file, directory or link (type %q)", ErrInvalid, h.Name, h.Typeflag)
		}
	}
}

// cleanEntry is a tar entry's name relative to the context root; ""
// for the root itself.
func cleanEntry(name string) (string, error) {
	if strings.HasPrefix(name, "/") || strings.ContainsRune(name, 0) {
		return "", fmt.Errorf("%w: %s", ErrEscape, name)
	}
	c := path.Clean(name)
	if c == ".." || strings.HasPrefix(c, "../") {
		return "", fmt.Errorf("%w: %s", ErrEscape, name)
	}
	if c == "." {
		return "", nil
	}
	return c, nil
}

func contextErr(name string, err error) error {
	if isEscape(err) {
		return fmt.Errorf("%w: %s", ErrEscape, name)
	}
	return fmt.Errorf("build context: %s: %w", name, err)
}
