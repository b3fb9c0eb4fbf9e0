package agent

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/airlockhq/airlock/agent/protocol"
)

// File requests reach only the roots (the workspace and /tmp). Programs in
// the sandbox can change the tree at any moment, so a path is never
// checked and then used by name: walk opens it one component at a time
// with openat(O_NOFOLLOW|O_DIRECTORY) from the root's descriptor, and the
// request then works on the last component relative to the directory it
// holds open. A symlink anywhere on the way, including one swapped in
// between two requests (or two steps), fails the walk instead of being
// followed. Every open uses O_NOFOLLOW and the type is checked on the
// descriptor it returns (see openDirAt for why not O_DIRECTORY). (openat2 with RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS would do the
// same in one call; the walk needs nothing newer than openat, on any
// kernel and gVisor release.)

// errRefused is wrapped by errors for paths that are refused rather than
// missing: symlinks, hard links, files that are not regular.
var errRefused = errors.New("refused")

func refused(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errRefused, fmt.Sprintf(format, args...))
}

// walk opens the directory that holds p's last component and returns it
// with that component's name ("" when p names a root itself). With mkdirs,
// missing directories on the way are made (mode 0755).
func (s *server) walk(p string, mkdirs bool) (*os.File, string, error) {
	root, rel, err := protocol.CleanPath(p)
	if err != nil {
		return nil, "", err
	}
	base := s.cfg.Workspace
	if root != "/workspace" {
		base = root
	}
	fd, err := unix.Open(base, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, "", &fs.PathError{Op: "open", Path: root, Err: err}
	}
	if rel == "." {
		return os.NewFile(uintptr(fd), root), "", nil
	}
	parts := strings.Split(rel, "/")
	for i, part := range parts[:len(parts)-1] {
		next, err := openDirAt(fd, part)
		if errors.Is(err, unix.ENOENT) && mkdirs {
			if err = unix.Mkdirat(fd, part, 0o755); err == nil || errors.Is(err, unix.EEXIST) {
				next, err = openDirAt(fd, part)
			}
		}
		unix.Close(fd)
		shown := path.Join(parts[:i+1]...)
		switch {
		case errors.Is(err, unix.ELOOP), errors.Is(err, unix.ENOTDIR):
			return nil, "", refused("%s is a symlink or not a directory", shown)
		case err != nil:
			return nil, "", &fs.PathError{Op: "open", Path: shown, Err: err}
		}
		fd = next
	}
	return os.NewFile(uintptr(fd), path.Join(root, path.Dir(rel))), parts[len(parts)-1], nil
}

// openDirAt opens the directory dirfd/name, refusing a symlink. It does
// not use O_DIRECTORY: gVisor (seen with the runsc these sandboxes run)
// follows a final symlink despite O_NOFOLLOW when O_DIRECTORY is set, where
// Linux fails with ELOOP. So the open asks only for O_NOFOLLOW (which
// gVisor honours) and the type is checked on the descriptor. O_NONBLOCK
// keeps a FIFO from blocking the open; it is refused by the check.
func openDirAt(dirfd int, name string) (int, error) {
	for {
		fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return -1, err
		}
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			unix.Close(fd)
			return -1, err
		}
		if st.Mode&unix.S_IFMT != unix.S_IFDIR {
			unix.Close(fd)
			return -1, unix.ENOTDIR
		}
		return fd, nil
	}
}

// openFileAt opens dir/name for reading: a regular file with one link,
// never a symlink, FIFO or device (O_NONBLOCK keeps a FIFO from blocking
// the open; the type check then refuses it).
func openFileAt(dir *os.File, name string) (*os.File, os.FileInfo, error) {
	fd, err := unix.Openat(int(dir.Fd()), name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ELOOP) {
		return nil, nil, refused("%s is a symlink", name)
	}
	if err != nil {
		return nil, nil, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	f := os.NewFile(uintptr(fd), name)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		f.Close()
		return nil, nil, err
	}
	fi := statInfo(name, &st)
	switch {
	case !fi.Mode().IsRegular():
		f.Close()
		return nil, nil, refused("%s is not a regular file", name)
	case st.Nlink > 1:
		// Another name of the same file may be outside the workspace.
		f.Close()
		return nil, nil, refused("%s is a hard link", name)
	}
	return f, fi, nil
}

// lstatAt describes dir/name without following a symlink.
func lstatAt(dir *os.File, name string) (os.FileInfo, error) {
	var st unix.Stat_t
	if err := unix.Fstatat(int(dir.Fd()), name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return nil, &fs.PathError{Op: "stat", Path: name, Err: err}
	}
	return statInfo(name, &st), nil
}

// statInfo is an fs.FileInfo from a stat result.
type statFileInfo struct {
	name string
	st   unix.Stat_t
}

func statInfo(name string, st *unix.Stat_t) os.FileInfo { return &statFileInfo{name: name, st: *st} }

func (f *statFileInfo) Name() string       { return f.name }
func (f *statFileInfo) Size() int64        { return f.st.Size }
func (f *statFileInfo) ModTime() time.Time { return time.Unix(f.st.Mtim.Unix()) }
func (f *statFileInfo) IsDir() bool        { return f.Mode().IsDir() }
func (f *statFileInfo) Sys() any           { return &f.st }
func (f *statFileInfo) Mode() fs.FileMode {
	m := fs.FileMode(f.st.Mode & 0o777)
	switch f.st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		m |= fs.ModeDir
	case unix.S_IFLNK:
		m |= fs.ModeSymlink
	case unix.S_IFIFO:
		m |= fs.ModeNamedPipe
	case unix.S_IFSOCK:
		m |= fs.ModeSocket
	case unix.S_IFCHR:
		m |= fs.ModeDevice | fs.ModeCharDevice
	case unix.S_IFBLK:
		m |= fs.ModeDevice
	}
	if f.st.Mode&unix.S_ISUID != 0 {
		m |= fs.ModeSetuid
	}
	if f.st.Mode&unix.S_ISGID != 0 {
		m |= fs.ModeSetgid
	}
	if f.st.Mode&unix.S_ISVTX != 0 {
		m |= fs.ModeSticky
	}
	return m
}
