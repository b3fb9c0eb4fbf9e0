package dockerfile

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path"
	"strconv"
	"strings"
)

// source is one file, directory or symlink a COPY copies: rel is its
// path in the context, dest its path in the rootfs (relative to /).
type source struct {
	rel  string
	dest string
	mode fs.FileMode
	link string // symlink target
	size int64
}

// cleanSource turns a COPY source into a path relative to the context
// root, refusing one that climbs out of it.
func cleanSource(s string) (string, error) {
	c := path.Clean(strings.TrimLeft(s, "/"))
	if c == ".." || strings.HasPrefix(c, "../") {
		return "", fmt.Errorf("%w: %s", ErrEscape, s)
	}
	return c, nil
}

func hasGlob(s string) bool { return strings.ContainsAny(s, "*?[") }

// plan lists what a COPY of st.Sources from ctx to st.Dest copies, in a
// stable order. Top-level symlinks are followed (inside the context
// only), nested ones copied as symlinks; special files are refused.
func planCopy(ctx *os.Root, st Step) ([]source, error) {
	var rels []string
	for _, s := range st.Sources {
		c, err := cleanSource(s)
		if err != nil {
			return nil, err
		}
		if !hasGlob(c) {
			rels = append(rels, c)
			continue
		}
		m, err := fs.Glob(ctx.FS(), c)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", s, err)
		}
		if len(m) == 0 {
			return nil, fmt.Errorf("%s: no source files were specified", s)
		}
		rels = append(rels, m...)
	}
	destDir := strings.HasSuffix(st.Dest, "/")
	if len(rels) > 1 && !destDir {
		return nil, fmt.Errorf("when copying more than one source the destination must be a directory and end with a /")
	}
	dest := strings.TrimPrefix(path.Clean(st.Dest), "/")
	var out []source
	for _, rel := range rels {
		fi, err := ctx.Stat(rel) // follows a top-level symlink, never out of the context
		if err != nil {
			if isEscape(err) {
				return nil, fmt.Errorf("%w: %s", ErrEscape, rel)
			}
			return nil, fmt.Errorf("%s: not found in the build context", rel)
		}
		if !fi.IsDir() {
			d := dest
			if destDir {
				d = path.Join(dest, path.Base(rel))
			}
			if !fi.Mode().IsRegular() {
				return nil, fmt.Errorf("%s: not a regular file, directory or symlink", rel)
			}
			out = append(out, source{rel: rel, dest: d, mode: fi.Mode(), size: fi.Size()})
			continue
		}
		// A directory: its contents go into dest.
		out = append(out, source{rel: rel, dest: dest, mode: fi.Mode()})
		err = fs.WalkDir(ctx.FS(), rel, func(p string, de fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if p == rel {
				return nil
			}
			d := path.Join(dest, strings.TrimPrefix(p, rel+"/"))
			if rel == "." {
				d = path.Join(dest, p)
			}
			info, err := de.Info()
			if err != nil {
				return err
			}
			s := source{rel: p, dest: d, mode: info.Mode(), size: info.Size()}
			switch {
			case info.Mode()&fs.ModeSymlink != 0:
				t, err := ctx.Readlink(p)
				if err != nil {
					return err
				}
				s.link, s.size = t, 0
			case info.IsDir():
				s.size = 0
			case !info.Mode().IsRegular():
				return fmt.Errorf("%s: not a regular file, directory or symlink", p)
			}
			out = append(out, s)
			return nil
		})
		if err != nil {
			if isEscape(err) {
				return nil, fmt.Errorf("%w: %v", ErrEscape, err)
			}
			return nil, err
		}
	}
	return out, nil
}

func isEscape(err error) bool {
	var pe *fs.PathError
	return errors.As(err, &pe) && strings.Contains(pe.Err.Error(), "escapes")
}

// digestCopy hashes what a COPY copies: every path, mode, link target
// and file content, with the step's ownership and mode flags. It is
// the part of a COPY step's cache key that the instruction's text does
// not say.
func digestCopy(ctx *os.Root, srcs []source, st Step) (string, error) {
	h := sha256.New()
	fmt.Fprintf(h, "chown=%q chmod=%q\n", st.Chown, st.Chmod)
	for _, s := range srcs {
		fmt.Fprintf(h, "%q %q %o %q %d\n", s.rel, s.dest, s.mode, s.link, s.size)
		if s.mode.IsRegular() {
			if err := hashFile(h, ctx, s.rel); err != nil {
				return "", err
			}
		}
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func hashFile(h hash.Hash, ctx *os.Root, rel string) error {
	f, err := ctx.Open(rel)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(h, f)
	return err
}

// parseChmod reads --chmod's octal mode.
func parseChmod(s string) (fs.FileMode, bool, error) {
	if s == "" {
		return 0, false, nil
	}
	n, err := strconv.ParseUint(s, 8, 32)
	if err != nil || n > 0o7777 {
		return 0, false, fmt.Errorf("--chmod=%s: only an octal mode is supported", s)
	}
	m := fs.FileMode(n & 0o777)
	if n&0o4000 != 0 {
		m |= fs.ModeSetuid
	}
	if n&0o2000 != 0 {
		m |= fs.ModeSetgid
	}
	if n&0o1000 != 0 {
		m |= fs.ModeSticky
	}
	return m, true, nil
}

// applyCopy copies srcs from ctx into the rootfs dst. Both are os.Roots:
// nothing is read outside the context or written outside the rootfs,
// whatever symlinks either holds. Files are owned by uid:gid (root
// unless --chown said otherwise, as in Docker).
func applyCopy(ctx, dst *os.Root, srcs []source, uid, gid int, chmod fs.FileMode, hasChmod bool) error {
	for _, s := range srcs {
		if s.dest == "" || s.dest == "." {
			if s.mode.IsDir() {
				continue // the contents of a directory copied to /
			}
			return fmt.Errorf("%s: cannot replace the root directory", s.rel)
		}
		if dir := path.Dir(s.dest); dir != "." {
			if err := dst.MkdirAll(dir, 0o755); err != nil {
				return fmt.Errorf("%s: %w", dir, err)
			}
		}
		mode := s.mode.Perm() | (s.mode & (fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky))
		if hasChmod {
			mode = chmod
		}
		switch {
		case s.mode.IsDir():
			if fi, err := dst.Lstat(s.dest); err == nil && !fi.IsDir() {
				if err := dst.Remove(s.dest); err != nil {
					return fmt.Errorf("%s: %w", s.dest, err)
				}
			}
			if err := dst.Mkdir(s.dest, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
				return fmt.Errorf("%s: %w", s.dest, err)
			}
		case s.link != "":
			if err := removeNonDir(dst, s.dest); err != nil {
				return err
			}
			if err := dst.Symlink(s.link, s.dest); err != nil {
				return fmt.Errorf("%s: %w", s.dest, err)
			}
			if err := dst.Lchown(s.dest, uid, gid); err != nil {
				return fmt.Errorf("%s: %w", s.dest, err)
			}
			continue
		default:
			if err := removeNonDir(dst, s.dest); err != nil {
				return err
			}
			if err := copyFile(ctx, dst, s.rel, s.dest); err != nil {
				return err
			}
		}
		if err := dst.Lchown(s.dest, uid, gid); err != nil {
			return fmt.Errorf("%s: %w", s.dest, err)
		}
		if err := dst.Chmod(s.dest, mode); err != nil {
			return fmt.Errorf("%s: %w", s.dest, err)
		}
	}
	return nil
}

// removeNonDir removes what is at p unless it is a directory (a file
// over a directory is refused, as Docker does).
func removeNonDir(dst *os.Root, p string) error {
	fi, err := dst.Lstat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("%s: %w", p, err)
	}
	if fi.IsDir() {
		return fmt.Errorf("cannot replace directory /%s with a file", p)
	}
	if err := dst.Remove(p); err != nil {
		return fmt.Errorf("%s: %w", p, err)
	}
	return nil
}

func copyFile(ctx, dst *os.Root, rel, dest string) error {
	in, err := ctx.Open(rel)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := dst.OpenFile(dest, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("%s: %w", dest, err)
	}
	_, err = io.Copy(out, in)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("%s: %w", dest, err)
	}
	return nil
}

// chownOf resolves --chown against the rootfs.
func chownOf(dst *os.Root, st Step) (int, int, error) {
	if st.Chown == "" {
		return 0, 0, nil
	}
	uid, gid, err := lookupUser(dst, st.Chown)
	return int(uid), int(gid), err
}
