package wsarchive

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"
	"syscall"
	"time"
)

// Limits bound an archive both ways.
type Limits struct {
	MaxEntries int   // files, directories and links (default 1,000,000)
	MaxDepth   int   // directory nesting (default 256)
	MaxBytes   int64 // the sum of file sizes (default 64 GiB)
}

func (l Limits) withDefaults() Limits {
	if l.MaxEntries <= 0 {
		l.MaxEntries = 1_000_000
	}
	if l.MaxDepth <= 0 {
		l.MaxDepth = 256
	}
	if l.MaxBytes <= 0 {
		l.MaxBytes = 64 << 30
	}
	return l
}

// Stats counts what went into or came out of an archive.
type Stats struct {
	Entries int64 // files, directories and symlinks
	Bytes   int64 // of file contents
	// Skipped are entries Write left out: sockets, devices, pipes and
	// symlinks pointing outside the workspace.
	Skipped int64
}

// ErrInvalid is wrapped by every error Extract gives for an archive it
// refuses.
var ErrInvalid = errors.New("wsarchive: invalid archive")

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
}

// tarMode is what of a mode is kept: the permission bits and sticky
// (never setuid or setgid).
func tarMode(m fs.FileMode) int64 {
	mode := int64(m & fs.ModePerm)
	if m&fs.ModeSticky != 0 {
		mode |= 0o1000
	}
	return mode
}

// Write archives the tree under dir into w, in lexical order.
func Write(ctx context.Context, dir string, w io.Writer, lim Limits) (Stats, error) {
	lim = lim.withDefaults()
	root, err := os.OpenRoot(dir)
	if err != nil {
		return Stats{}, err
	}
	defer root.Close()
	tw := tar.NewWriter(w)
	wr := &writer{ctx: ctx, tw: tw, lim: lim}
	if err := wr.dir(root, "", 0); err != nil {
		return wr.st, err
	}
	return wr.st, tw.Close()
}

type writer struct {
	ctx context.Context
	tw  *tar.Writer
	lim Limits
	st  Stats
	buf []byte
}

func (w *writer) count() error {
	w.st.Entries++
	if w.st.Entries > int64(w.lim.MaxEntries) {
		return fmt.Errorf("wsarchive: more than %d entries", w.lim.MaxEntries)
	}
	return w.ctx.Err()
}

func (w *writer) dir(d *os.Root, rel string, depth int) error {
	if depth > w.lim.MaxDepth {
		return fmt.Errorf("wsarchive: directories nested deeper than %d", w.lim.MaxDepth)
	}
	f, err := d.Open(".")
	if err != nil {
		return err
	}
	names, err := f.Readdirnames(-1)
	f.Close()
	if err != nil {
		return err
	}
	sort.Strings(names)
	for _, name := range names {
		fi, err := d.Lstat(name)
		if errors.Is(err, fs.ErrNotExist) {
			continue // removed meanwhile
		}
		if err != nil {
			return err
		}
		p := path.Join(rel, name)
		switch {
		case fi.Mode().IsRegular():
			if err := w.file(d, name, p, fi); err != nil {
				return err
			}
		case fi.IsDir():
			if err := w.count(); err != nil {
				return err
			}
			if err := w.tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: p + "/", Mode: tarMode(fi.Mode()), ModTime: fi.ModTime(), Format: tar.FormatPAX}); err != nil {
				return err
			}
			sub, err := d.OpenRoot(name)
			if err != nil {
				return err
			}
			err = w.dir(sub, p, depth+1)
			sub.Close()
			if err != nil {
				return err
			}
		case fi.Mode()&fs.ModeSymlink != 0:
			target, err := d.Readlink(name)
			if err != nil {
				return err
			}
			if !linkInside(p, target) {
				w.st.Skipped++
				continue
			}
			if err := w.count(); err != nil {
				return err
			}
			if err := w.tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: p, Linkname: target, Mode: 0o777, ModTime: fi.ModTime(), Format: tar.FormatPAX}); err != nil {
				return err
			}
		default:
			w.st.Skipped++
		}
	}
	return nil
}

// file writes one regular file: opened through its directory without
// following a symlink swapped in since the stat, and checked to still be
// a regular file.
func (w *writer) file(d *os.Root, name, p string, fi fs.FileInfo) error {
	f, err := d.OpenFile(name, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if errors.Is(err, syscall.ELOOP) {
			w.st.Skipped++
			return nil
		}
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if !st.Mode().IsRegular() {
		w.st.Skipped++
		return nil
	}
	if err := w.count(); err != nil {
		return err
	}
	size := st.Size()
	if w.st.Bytes+size > w.lim.MaxBytes {
		return fmt.Errorf("wsarchive: the workspace holds more than %d bytes", w.lim.MaxBytes)
	}
	if err := w.tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: p, Size: size, Mode: tarMode(st.Mode()), ModTime: st.ModTime(), Format: tar.FormatPAX}); err != nil {
		return err
	}
	if w.buf == nil {
		w.buf = make([]byte, 256<<10)
	}
	// Exactly size bytes: a file that grows or shrinks meanwhile is cut
	// or padded with zeros, never a broken archive.
	n, err := io.CopyBuffer(w.tw, io.LimitReader(f, size), w.buf)
	if err != nil {
		return err
	}
	if n < size {
		if _, err := io.CopyN(w.tw, zeros{}, size-n); err != nil {
			return err
		}
	}
	w.st.Bytes += size
	return nil
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// linkInside reports whether a symlink at p (relative to the workspace)
// with target points inside the workspace, by its text alone: relative,
// and never climbing above the workspace.
func linkInside(p, target string) bool {
	if target == "" || strings.HasPrefix(target, "/") || strings.ContainsRune(target, 0) {
		return false
	}
	joined := path.Join(path.Dir(p), target)
	return joined != ".." && !strings.HasPrefix(joined, "../")
}

// validName checks an entry's name: relative, clean, inside.
func validName(name string) (string, error) {
	n := strings.TrimSuffix(name, "/")
	switch {
	case n == "" || n == ".":
		return "", invalid("an entry has an empty name")
	case strings.ContainsRune(n, 0) || len(n) > 4096:
		return "", invalid("entry name %.80q is not valid", n)
	case strings.HasPrefix(n, "/"):
		return "", invalid("entry %.80q has an absolute path", n)
	case path.Clean(n) != n:
		return "", invalid("entry %.80q is not a clean path", n)
	case n == ".." || strings.HasPrefix(n, "../"):
		return "", invalid("entry %.80q climbs out of the workspace", n)
	}
	for seg := range strings.SplitSeq(n, "/") {
		if seg == ".." || seg == "." {
			return "", invalid("entry %.80q has a %q segment", n, seg)
		}
	}
	return n, nil
}

// Extract writes the archive from r into the empty or fresh directory
// dir, every entry owned by uid and gid. It refuses, with an error
// wrapping ErrInvalid, anything but regular files, directories and
// symlinks inside the tree.
func Extract(ctx context.Context, r io.Reader, dir string, uid, gid int, lim Limits) (Stats, error) {
	lim = lim.withDefaults()
	root, err := os.OpenRoot(dir)
	if err != nil {
		return Stats{}, err
	}
	defer root.Close()
	tr := tar.NewReader(r)
	var st Stats
	buf := make([]byte, 256<<10)
	for {
		if err := ctx.Err(); err != nil {
			return st, err
		}
		h, err := tr.Next()
		if err == io.EOF {
			return st, nil
		}
		if err != nil {
			if errors.Is(err, ErrInvalid) {
				return st, err
			}
			return st, fmt.Errorf("%w: %v", ErrInvalid, err)
		}
		name, err := validName(h.Name)
		if err != nil {
			return st, err
		}
		if strings.Count(name, "/") > lim.MaxDepth {
			return st, invalid("entry %.80q is nested deeper than %d", name, lim.MaxDepth)
		}
		st.Entries++
		if st.Entries > int64(lim.MaxEntries) {
			return st, invalid("more than %d entries", lim.MaxEntries)
		}
		mode := fs.FileMode(h.Mode) & fs.ModePerm
		if h.Mode&0o1000 != 0 {
			mode |= fs.ModeSticky
		}
		if parent := path.Dir(name); parent != "." {
			if err := root.MkdirAll(parent, 0o755); err != nil {
				return st, err
			}
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if err := root.Mkdir(name, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
				return st, err
			}
			if fi, err := root.Lstat(name); err != nil || !fi.IsDir() {
				return st, invalid("entry %.80q is a directory and something else", name)
			}
		case tar.TypeReg:
			if h.Size < 0 || st.Bytes+h.Size > lim.MaxBytes {
				return st, invalid("the files hold more than %d bytes", lim.MaxBytes)
			}
			f, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
			if errors.Is(err, fs.ErrExist) {
				return st, invalid("entry %.80q appears twice", name)
			}
			if err != nil {
				return st, err
			}
			n, err := io.CopyBuffer(f, io.LimitReader(tr, h.Size), buf)
			cerr := f.Close()
			if err == nil && n != h.Size {
				err = invalid("entry %.80q is cut short", name)
			}
			if err := errors.Join(err, cerr); err != nil {
				return st, err
			}
			st.Bytes += n
		case tar.TypeSymlink:
			if !linkInside(name, h.Linkname) {
				return st, invalid("symlink %.80q points outside the workspace", name)
			}
			if err := root.Symlink(h.Linkname, name); err != nil {
				if errors.Is(err, fs.ErrExist) {
					return st, invalid("entry %.80q appears twice", name)
				}
				return st, err
			}
			if err := root.Lchown(name, uid, gid); err != nil {
				return st, err
			}
			continue
		default:
			return st, invalid("entry %.80q has type %q; only files, directories and symlinks are kept", name, h.Typeflag)
		}
		// Never through a symlink: the entry was just made as a file or
		// directory by this call (a name that is a link was refused).
		if fi, err := root.Lstat(name); err != nil || fi.Mode()&fs.ModeSymlink != 0 {
			return st, invalid("entry %.80q changed while it was written", name)
		}
		if err := root.Lchown(name, uid, gid); err != nil {
			return st, err
		}
		if err := root.Chmod(name, mode); err != nil {
			return st, err
		}
		if !h.ModTime.IsZero() {
			root.Chtimes(name, time.Now(), h.ModTime)
		}
	}
}
