package agent

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"golang.org/x/sys/unix"

	"github.com/airlockhq/airlock/agent/protocol"
)

// mkdir makes p and its missing parents (protocol.OpMkdir).
func (s *server) mkdir(stream uint32, p string) {
	dir, name, err := s.walk(p, true)
	if err != nil {
		s.sendError(stream, errCode(err), err)
		return
	}
	defer dir.Close()
	if name == "" {
		s.sendError(stream, "exists", fmt.Errorf("%s exists", p))
		return
	}
	err = unix.Mkdirat(int(dir.Fd()), name, 0o755)
	if errors.Is(err, unix.EEXIST) {
		if fi, serr := lstatAt(dir, name); serr == nil && fi.IsDir() {
			s.sendError(stream, "exists", fmt.Errorf("%s exists", p))
		} else {
			s.sendError(stream, "invalid", fmt.Errorf("%s exists and is not a directory", p))
		}
		return
	}
	if err == nil {
		var fi fs.FileInfo
		if fi, err = lstatAt(dir, name); err == nil {
			info := fileInfo(name, fi)
			s.respond(stream, protocol.Response{Info: &info})
			return
		}
	}
	err = &fs.PathError{Op: "mkdir", Path: p, Err: err}
	s.sendError(stream, errCode(err), err)
}

// move renames src to dst (protocol.OpMove). Neither path is followed
// through a symlink; the entry moved may itself be one (rename does not
// follow it).
func (s *server) move(stream uint32, src, dst string) {
	sdir, sname, err := s.walk(src, false)
	if err != nil {
		s.sendError(stream, errCode(err), err)
		return
	}
	defer sdir.Close()
	ddir, dname, err := s.walk(dst, true)
	if err != nil {
		s.sendError(stream, errCode(err), err)
		return
	}
	defer ddir.Close()
	if sname == "" || dname == "" {
		s.sendError(stream, "invalid", errors.New("cannot move a root directory"))
		return
	}
	if err := unix.Renameat(int(sdir.Fd()), sname, int(ddir.Fd()), dname); err != nil {
		err = &fs.PathError{Op: "rename", Path: src, Err: err}
		s.sendError(stream, errCode(err), err)
		return
	}
	fi, err := lstatAt(ddir, dname)
	if err != nil {
		s.sendError(stream, errCode(err), err)
		return
	}
	info := fileInfo(dname, fi)
	s.respond(stream, protocol.Response{Info: &info})
}

// maxRemoveDepth bounds the nesting removeAll descends into (each level
// holds a descriptor open).
const maxRemoveDepth = 256

// removeAll removes p, and everything below it if it is a directory
// (protocol.OpRemove with Recursive).
func (s *server) removeAll(stream uint32, p string) {
	dir, name, err := s.walk(p, false)
	if err == nil && name == "" {
		dir.Close()
		err = errors.New("cannot remove a root directory")
	}
	if err != nil {
		s.sendError(stream, errCode(err), err)
		return
	}
	defer dir.Close()
	if err := removeTreeAt(int(dir.Fd()), name, 0); err != nil {
		err = &fs.PathError{Op: "remove", Path: p, Err: err}
		s.sendError(stream, errCode(err), err)
		return
	}
	s.respond(stream, protocol.Response{})
}

// removeTreeAt removes dirfd/name: a file or symlink is unlinked, a
// directory emptied (opened with openDirAt, never through a symlink) and
// then removed.
func removeTreeAt(dirfd int, name string, depth int) error {
	err := unix.Unlinkat(dirfd, name, 0)
	if err == nil || !(errors.Is(err, unix.EISDIR) || errors.Is(err, unix.EPERM)) {
		return err
	}
	if depth >= maxRemoveDepth {
		return fmt.Errorf("directories nested deeper than %d levels", maxRemoveDepth)
	}
	// Code in the sandbox may add entries meanwhile: a few passes.
	for pass := 0; ; pass++ {
		fd, err := openDirAt(dirfd, name)
		if errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP) {
			return unix.Unlinkat(dirfd, name, 0) // swapped for a file or symlink
		}
		if err != nil {
			return err
		}
		d := os.NewFile(uintptr(fd), name)
		names, rerr := d.Readdirnames(-1)
		if rerr != nil && rerr != io.EOF {
			d.Close()
			return rerr
		}
		for _, n := range names {
			if err := removeTreeAt(fd, n, depth+1); err != nil && !errors.Is(err, unix.ENOENT) {
				d.Close()
				return err
			}
		}
		d.Close()
		err = unix.Unlinkat(dirfd, name, unix.AT_REMOVEDIR)
		if !errors.Is(err, unix.ENOTEMPTY) || pass >= 3 {
			return err
		}
	}
}
