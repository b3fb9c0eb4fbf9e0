package template

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/airlockhq/airlock"
)

// Problem types of the unpacker's refusals.
const (
	ProblemArchiveRefused = "template-archive-refused"
	ProblemTooLarge       = "template-too-large"
	ProblemTooManyFiles   = "template-too-many-files"
)

func refuse(format string, args ...any) error {
	return airlock.Problem(airlock.EUNPROCESSABLE, ProblemArchiveRefused, format, args...)
}

// unpacker applies image layers, lowest first, to a rootfs directory.
// Every path is resolved beneath the root with openat2(RESOLVE_BENEATH):
// a symbolic link (absolute, or with enough "..") that would lead out of
// the root fails the resolution and the archive is refused; names with
// ".." or a leading "/" are refused; hard links must name a regular file
// inside the root; device nodes and FIFOs are dropped; whiteouts
// (".wh.NAME", ".wh..wh..opq") remove what lower layers put there; the
// bytes and files of the whole rootfs are bounded. Nothing is ever
// written outside the root.
type unpacker struct {
	root     string
	rootfd   int
	maxBytes int64 // 0: no bound
	maxFiles int64
	log      io.Writer

	bytes   int64
	files   int64
	dropped int
}

func newUnpacker(root string, maxBytes, maxFiles int64, log io.Writer) (*unpacker, error) {
	fd, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: root, Err: err}
	}
	return &unpacker{root: root, rootfd: fd, maxBytes: maxBytes, maxFiles: maxFiles, log: log}, nil
}

func (u *unpacker) Close() error { return unix.Close(u.rootfd) }

const beneath = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV

// cleanName returns an entry's name relative to the root, or refuses it.
func cleanName(name string) (string, error) {
	if strings.ContainsRune(name, 0) {
		return "", refuse("entry %q: a NUL byte in the name", name)
	}
	n := strings.TrimPrefix(name, "./")
	if strings.HasPrefix(n, "/") {
		return "", refuse("entry %q: an absolute path", name)
	}
	for _, part := range strings.Split(n, "/") {
		if part == ".." {
			return "", refuse("entry %q: a \"..\" component", name)
		}
	}
	n = path.Clean(n)
	if n == "." || n == "" {
		return ".", nil
	}
	return n, nil
}

// openDir opens the directory rel beneath the root (O_PATH), making the
// missing directories on the way when mkdirs.
func (u *unpacker) openDir(rel string, mkdirs bool) (int, error) {
	if rel == "." {
		return unix.Dup(u.rootfd)
	}
	how := &unix.OpenHow{Flags: unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC, Resolve: beneath}
	fd, err := unix.Openat2(u.rootfd, rel, how)
	if err == nil {
		return fd, nil
	}
	if errors.Is(err, unix.ENOENT) && mkdirs {
		parent, perr := u.openDir(path.Dir(rel), true)
		if perr != nil {
			return -1, perr
		}
		merr := unix.Mkdirat(parent, path.Base(rel), 0o755)
		unix.Close(parent)
		if merr != nil && !errors.Is(merr, unix.EEXIST) {
			return -1, u.pathErr(rel, merr)
		}
		if cerr := u.count(rel, 0); cerr != nil {
			return -1, cerr
		}
		fd, err = unix.Openat2(u.rootfd, rel, how)
	}
	if err != nil {
		return -1, u.pathErr(rel, err)
	}
	return fd, nil
}

// pathErr turns a resolution error into a refusal where the archive is to
// blame.
func (u *unpacker) pathErr(rel string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, unix.EXDEV), errors.Is(err, unix.ELOOP):
		return refuse("entry %q: its path goes through a symbolic link that leads out of the image", rel)
	case errors.Is(err, unix.ENOTDIR):
		return refuse("entry %q: a component of its path is not a directory", rel)
	}
	return &os.PathError{Op: "unpack", Path: rel, Err: err}
}

// count adds a file of size bytes to the bounds.
func (u *unpacker) count(rel string, size int64) error {
	u.files++
	u.bytes += size
	if u.maxFiles > 0 && u.files > u.maxFiles {
		return airlock.Problem(airlock.ETOOLARGE, ProblemTooManyFiles, "the image has more than %d files (at %q)", u.maxFiles, rel)
	}
	if u.maxBytes > 0 && u.bytes > u.maxBytes {
		return airlock.Problem(airlock.ETOOLARGE, ProblemTooLarge, "the image's files are over %d bytes unpacked (at %q)", u.maxBytes, rel)
	}
	return nil
}

// removeAt removes name in the directory dirfd (whatever it is; a
// directory with its contents), never following a link.
func (u *unpacker) removeAt(dirfd int, rel, name string) error {
	var st unix.Stat_t
	if err := unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil
		}
		return u.pathErr(rel, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return u.pathErr(rel, unix.Unlinkat(dirfd, name, 0))
	}
	how := &unix.OpenHow{Flags: unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC, Resolve: beneath}
	fd, err := unix.Openat2(dirfd, name, how)
	if err != nil {
		return u.pathErr(rel, err)
	}
	d := os.NewFile(uintptr(fd), rel)
	names, err := d.Readdirnames(-1)
	if err == nil {
		for _, n := range names {
			if err = u.removeAt(fd, rel+"/"+n, n); err != nil {
				break
			}
		}
	}
	d.Close()
	if err != nil {
		return err
	}
	return u.pathErr(rel, unix.Unlinkat(dirfd, name, unix.AT_REMOVEDIR))
}

// unnoticed returns err unless it is nil; for the "if err :=" chains.
func (u *unpacker) remove(rel string) error {
	parent, err := u.openDir(path.Dir(rel), false)
	if errors.Is(err, unix.ENOENT) || isNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	defer unix.Close(parent)
	return u.removeAt(parent, rel, path.Base(rel))
}

func isNotFound(err error) bool {
	var pe *os.PathError
	return errors.As(err, &pe) && errors.Is(pe.Err, unix.ENOENT)
}

// layer applies one layer's tar stream.
func (u *unpacker) layer(r io.Reader) error {
	tr := tar.NewReader(r)
	written := map[string]bool{} // this layer's entries, for opaque whiteouts
	var opaque []string
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return refuse("the layer is not a readable tar: %v", err)
		}
		rel, err := cleanName(h.Name)
		if err != nil {
			return err
		}
		if rel == "." {
			continue
		}
		dir, base := path.Dir(rel), path.Base(rel)
		if base == ".wh..wh..opq" {
			opaque = append(opaque, dir)
			continue
		}
		if name, ok := strings.CutPrefix(base, ".wh."); ok {
			if err := u.remove(path.Join(dir, name)); err != nil {
				return err
			}
			continue
		}
		written[rel] = true
		if err := u.entry(tr, h, rel); err != nil {
			return err
		}
	}
	for _, d := range opaque {
		if err := u.clearLower(d, written); err != nil {
			return err
		}
	}
	return nil
}

// clearLower removes what is in dir but was not written by this layer.
func (u *unpacker) clearLower(dir string, written map[string]bool) error {
	fd, err := u.openDir(dir, true)
	if err != nil {
		return err
	}
	rfd, err := unix.Openat(fd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	unix.Close(fd)
	if err != nil {
		return u.pathErr(dir, err)
	}
	d := os.NewFile(uintptr(rfd), dir)
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return err
	}
	for _, n := range names {
		p := path.Join(dir, n)
		if written[p] || hasWrittenBelow(written, p) {
			continue
		}
		if err := u.removeAt(rfd, p, n); err != nil {
			return err
		}
	}
	return nil
}

func hasWrittenBelow(written map[string]bool, p string) bool {
	for w := range written {
		if strings.HasPrefix(w, p+"/") {
			return true
		}
	}
	return false
}

// entry writes one tar entry at rel.
func (u *unpacker) entry(tr *tar.Reader, h *tar.Header, rel string) error {
	mode := uint32(h.Mode & 0o7777)
	switch h.Typeflag {
	case tar.TypeDir:
		fd, err := u.openDir(path.Dir(rel), true)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		var st unix.Stat_t
		err = unix.Fstatat(fd, path.Base(rel), &st, unix.AT_SYMLINK_NOFOLLOW)
		if err == nil && st.Mode&unix.S_IFMT != unix.S_IFDIR {
			if err := u.removeAt(fd, rel, path.Base(rel)); err != nil {
				return err
			}
			err = unix.ENOENT
		}
		if err != nil {
			if err := unix.Mkdirat(fd, path.Base(rel), 0o755); err != nil {
				return u.pathErr(rel, err)
			}
			if err := u.count(rel, 0); err != nil {
				return err
			}
		}
		return u.meta(fd, rel, h, mode)
	case tar.TypeReg, tar.TypeRegA:
		fd, err := u.openDir(path.Dir(rel), true)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		if err := u.removeAt(fd, rel, path.Base(rel)); err != nil {
			return err
		}
		if err := u.count(rel, h.Size); err != nil {
			return err
		}
		ffd, err := unix.Openat(fd, path.Base(rel), unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
		if err != nil {
			return u.pathErr(rel, err)
		}
		f := os.NewFile(uintptr(ffd), rel)
		n, err := io.Copy(f, io.LimitReader(tr, h.Size))
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("unpack %s: %w", rel, err)
		}
		if n != h.Size {
			return refuse("entry %q: the layer ends inside the file", rel)
		}
		return u.meta(fd, rel, h, mode)
	case tar.TypeSymlink:
		fd, err := u.openDir(path.Dir(rel), true)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		if err := u.removeAt(fd, rel, path.Base(rel)); err != nil {
			return err
		}
		if err := u.count(rel, 0); err != nil {
			return err
		}
		if err := unix.Symlinkat(h.Linkname, fd, path.Base(rel)); err != nil {
			return u.pathErr(rel, err)
		}
		return u.owner(fd, path.Base(rel), h)
	case tar.TypeLink:
		target, err := cleanName(h.Linkname)
		if err != nil {
			return refuse("hard link %q to %q: the target is outside the image", rel, h.Linkname)
		}
		tfd, err := u.openDir(path.Dir(target), false)
		if err != nil {
			if isNotFound(err) {
				return refuse("hard link %q to %q: no such file in the image", rel, h.Linkname)
			}
			return err
		}
		defer unix.Close(tfd)
		var st unix.Stat_t
		if err := unix.Fstatat(tfd, path.Base(target), &st, unix.AT_SYMLINK_NOFOLLOW); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
			return refuse("hard link %q to %q: the target is not a regular file of the image", rel, h.Linkname)
		}
		fd, err := u.openDir(path.Dir(rel), true)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		if rel == target {
			return nil
		}
		if err := u.removeAt(fd, rel, path.Base(rel)); err != nil {
			return err
		}
		if err := u.count(rel, 0); err != nil {
			return err
		}
		return u.pathErr(rel, unix.Linkat(tfd, path.Base(target), fd, path.Base(rel), 0))
	case tar.TypeChar, tar.TypeBlock, tar.TypeFifo:
		u.dropped++
		fmt.Fprintf(u.log, "  dropped device or FIFO %s\n", rel)
		return nil
	case tar.TypeXGlobalHeader:
		return nil
	default:
		u.dropped++
		fmt.Fprintf(u.log, "  dropped %s (tar type %q)\n", rel, h.Typeflag)
		return nil
	}
}

// meta sets an entry's mode and owner (no set-id bits for other owners
// than root are kept: they are kept as the image has them, the sandbox
// has no privilege to gain from them).
func (u *unpacker) meta(dirfd int, rel string, h *tar.Header, mode uint32) error {
	name := path.Base(rel)
	fd, err := unix.Openat(dirfd, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return u.pathErr(rel, err)
	}
	defer unix.Close(fd)
	proc := fmt.Sprintf("/proc/self/fd/%d", fd)
	if err := unix.Fchmodat(unix.AT_FDCWD, proc, mode, 0); err != nil {
		return u.pathErr(rel, err)
	}
	return u.owner(dirfd, name, h)
}

func (u *unpacker) owner(dirfd int, name string, h *tar.Header) error {
	if os.Geteuid() != 0 {
		return nil
	}
	return unix.Fchownat(dirfd, name, h.Uid, h.Gid, unix.AT_SYMLINK_NOFOLLOW)
}

// rootPath is the host path of rel (for messages and tests).
func (u *unpacker) rootPath(rel string) string { return filepath.Join(u.root, rel) }
