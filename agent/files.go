package agent

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"syscall"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"github.com/airlockhq/airlock/agent/protocol"
)

func errCode(err error) string {
	switch {
	case errors.Is(err, errRefused):
		return "refused"
	case errors.Is(err, syscall.ENOTEMPTY):
		return "not_empty"
	case errors.Is(err, fs.ErrNotExist):
		return "not_found"
	case errors.Is(err, fs.ErrExist):
		return "exists"
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
		return "no_space"
	case errors.Is(err, fs.ErrPermission):
		return "permission"
	}
	return "invalid"
}

func fileInfo(name string, fi fs.FileInfo) protocol.FileInfo {
	return protocol.FileInfo{Name: name, Size: fi.Size(), Mode: uint32(fi.Mode()), MtimeNS: fi.ModTime().UnixNano(), IsDir: fi.IsDir()}
}

// putHandler receives a file's bytes into a temporary file in the
// destination's directory (held open since the walk) and renames it into
// place at the end, so a failed upload leaves nothing behind and a symlink
// at the destination is replaced, never written through.
type putHandler struct {
	s      *server
	stream uint32
	dir    *os.File
	tmp    *os.File
	name   string
	n      int64
	failed bool
}

func (s *server) put(stream uint32, p string, mode uint32) {
	fail := func(err error) {
		s.sendError(stream, errCode(err), err)
		s.setHandler(stream, &putHandler{s: s, stream: stream, failed: true})
	}
	dir, name, err := s.walk(p, true)
	if err != nil {
		fail(err)
		return
	}
	if name == "" {
		dir.Close()
		fail(errors.New("cannot write a root directory"))
		return
	}
	if fi, err := lstatAt(dir, name); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
		// Refused like every symlink. (One swapped in later is replaced
		// by the rename, never written through.)
		dir.Close()
		fail(refused("%s is a symlink", p))
		return
	}
	var rnd [8]byte
	rand.Read(rnd[:])
	tmpName := ".airlock-put-" + hex.EncodeToString(rnd[:])
	fd, err := unix.Openat(int(dir.Fd()), tmpName, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		dir.Close()
		fail(&fs.PathError{Op: "create", Path: p, Err: err})
		return
	}
	tmp := os.NewFile(uintptr(fd), tmpName)
	if mode == 0 {
		mode = 0o644
	}
	tmp.Chmod(fs.FileMode(mode) & fs.ModePerm)
	s.setHandler(stream, &putHandler{s: s, stream: stream, dir: dir, tmp: tmp, name: name})
}

// writeWhole writes a whole small file as put does: a new file in the
// directory, renamed over the name, never written through a link.
func (s *server) writeWhole(f protocol.InlineFile) error {
	dir, name, err := s.walk(f.Path, true)
	if err != nil {
		return err
	}
	defer dir.Close()
	if name == "" {
		return errors.New("cannot write a root directory")
	}
	if fi, err := lstatAt(dir, name); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
		return refused("%s is a symlink", f.Path)
	}
	var rnd [8]byte
	rand.Read(rnd[:])
	tmpName := ".airlock-put-" + hex.EncodeToString(rnd[:])
	fd, err := unix.Openat(int(dir.Fd()), tmpName, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return &fs.PathError{Op: "create", Path: f.Path, Err: err}
	}
	tmp := os.NewFile(uintptr(fd), tmpName)
	mode := f.Mode
	if mode == 0 {
		mode = 0o644
	}
	tmp.Chmod(fs.FileMode(mode) & fs.ModePerm)
	_, err = tmp.Write(f.Data)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		if err = unix.Renameat(int(dir.Fd()), tmpName, int(dir.Fd()), name); err != nil {
			err = &fs.PathError{Op: "rename", Path: name, Err: err}
		}
	}
	if err != nil {
		unix.Unlinkat(int(dir.Fd()), tmpName, 0)
	}
	return err
}

func (h *putHandler) frame(f protocol.Frame) {
	if h.failed {
		if f.Type == protocol.TDataEnd || f.Type == protocol.TError {
			h.s.setHandler(h.stream, nil)
		}
		return
	}
	switch f.Type {
	case protocol.TData:
		n, err := h.tmp.Write(f.Payload)
		h.n += int64(n)
		if err != nil {
			h.fail(err)
		}
	case protocol.TDataEnd:
		h.s.setHandler(h.stream, nil)
		tmpName := h.tmp.Name()
		err := h.tmp.Close()
		h.tmp = nil
		if err == nil {
			err = unix.Renameat(int(h.dir.Fd()), tmpName, int(h.dir.Fd()), h.name)
			if err != nil {
				err = &fs.PathError{Op: "rename", Path: h.name, Err: err}
			}
		}
		if err != nil {
			unix.Unlinkat(int(h.dir.Fd()), tmpName, 0)
			h.dir.Close()
			h.s.sendError(h.stream, errCode(err), err)
			return
		}
		h.dir.Close()
		h.s.respond(h.stream, protocol.Response{Written: h.n})
	case protocol.TError:
		h.s.setHandler(h.stream, nil)
		h.abort()
	}
}

func (h *putHandler) fail(err error) {
	h.abort()
	h.failed = true
	h.s.sendError(h.stream, errCode(err), err)
}

func (h *putHandler) abort() {
	if h.tmp != nil {
		tmpName := h.tmp.Name()
		h.tmp.Close()
		unix.Unlinkat(int(h.dir.Fd()), tmpName, 0)
		h.tmp = nil
		h.dir.Close()
	}
}

func (s *server) get(stream uint32, p string, max int64) {
	dir, name, err := s.walk(p, false)
	if err != nil {
		s.sendError(stream, errCode(err), err)
		return
	}
	defer dir.Close()
	if name == "" {
		s.sendError(stream, "invalid", fmt.Errorf("%s is a directory", p))
		return
	}
	f, fi, err := openFileAt(dir, name)
	if err != nil {
		s.sendError(stream, errCode(err), err)
		return
	}
	defer f.Close()
	if max > 0 && fi.Size() > max {
		s.sendError(stream, "too_large", fmt.Errorf("%s is %d bytes, more than %d", p, fi.Size(), max))
		return
	}
	buf := make([]byte, protocol.MaxPayload)
	var sent int64
	for {
		n, rerr := f.Read(buf)
		if n > 0 {
			if max > 0 && sent+int64(n) > max {
				s.sendError(stream, "too_large", fmt.Errorf("%s grew past %d bytes", p, max))
				return
			}
			sent += int64(n)
			payload := make([]byte, n)
			copy(payload, buf[:n])
			if s.send(protocol.Frame{Type: protocol.TData, Stream: stream, Payload: payload}) != nil {
				return
			}
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			s.sendError(stream, errCode(rerr), rerr)
			return
		}
	}
	s.send(protocol.Frame{Type: protocol.TDataEnd, Stream: stream})
}

// openListed opens the directory p names, never through a symlink.
func (s *server) openListed(p string) (*os.File, error) {
	dir, name, err := s.walk(p, false)
	if err != nil || name == "" {
		return dir, err
	}
	defer dir.Close()
	fd, err := openDirAt(int(dir.Fd()), name)
	switch {
	case errors.Is(err, unix.ELOOP), errors.Is(err, unix.ENOTDIR):
		return nil, refused("%s is a symlink or not a directory", p)
	case err != nil:
		return nil, &fs.PathError{Op: "open", Path: p, Err: err}
	}
	return os.NewFile(uintptr(fd), p), nil
}

func (s *server) list(stream uint32, p string) {
	d, err := s.openListed(p)
	if err != nil {
		s.sendError(stream, errCode(err), err)
		return
	}
	defer d.Close()
	names, err := d.Readdirnames(protocol.MaxListEntries + 1)
	if err != nil && err != io.EOF {
		s.sendError(stream, errCode(err), err)
		return
	}
	more := len(names) > protocol.MaxListEntries
	if more {
		names = names[:protocol.MaxListEntries]
	}
	entries := make([]protocol.FileInfo, 0, len(names))
	for _, n := range names {
		fi, err := lstatAt(d, n)
		// Invalid UTF-8 would reach the host mangled (and longer).
		if err != nil || len(n) > protocol.MaxNameBytes || !utf8.ValidString(n) {
			continue
		}
		entries = append(entries, fileInfo(n, fi))
	}
	s.respond(stream, protocol.Response{Entries: entries, More: more})
}

func (s *server) stat(stream uint32, p string) {
	dir, name, err := s.walk(p, false)
	if err != nil {
		s.sendError(stream, errCode(err), err)
		return
	}
	defer dir.Close()
	var fi fs.FileInfo
	if name == "" {
		var st unix.Stat_t
		if err = unix.Fstat(int(dir.Fd()), &st); err == nil {
			root, _, _ := protocol.CleanPath(p)
			fi = statInfo(path.Base(root), &st)
		}
	} else if fi, err = lstatAt(dir, name); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
		err = refused("%s is a symlink", p)
	}
	if err != nil {
		s.sendError(stream, errCode(err), err)
		return
	}
	info := fileInfo(fi.Name(), fi)
	s.respond(stream, protocol.Response{Info: &info})
}

func (s *server) remove(stream uint32, p string) {
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
	err = unix.Unlinkat(int(dir.Fd()), name, 0)
	if errors.Is(err, unix.EISDIR) || errors.Is(err, unix.EPERM) {
		// A directory (Linux says EISDIR, POSIX allows EPERM): remove it
		// if it is empty.
		if derr := unix.Unlinkat(int(dir.Fd()), name, unix.AT_REMOVEDIR); derr == nil || !errors.Is(derr, unix.ENOTDIR) {
			err = derr
		}
	}
	if err != nil {
		s.sendError(stream, errCode(&fs.PathError{Op: "remove", Path: p, Err: err}), &fs.PathError{Op: "remove", Path: p, Err: err})
		return
	}
	s.respond(stream, protocol.Response{})
}
