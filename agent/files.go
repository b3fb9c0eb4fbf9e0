package agent

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"unicode/utf8"

	"github.com/airlockhq/airlock/protocol"
)

// resolve maps a workspace path to an absolute one, refusing any symlink
// on the way (the final element included when noFollow).
func (s *server) resolve(p string, noFollowLast bool) (string, error) {
	root, rel, err := protocol.CleanPath(p)
	if err != nil {
		return "", err
	}
	full := s.cfg.Workspace
	if root != "/workspace" {
		full = root
	}
	if rel == "." {
		return full, nil
	}
	segs := strings.Split(rel, "/")
	for i, seg := range segs {
		full = filepath.Join(full, seg)
		if i == len(segs)-1 && !noFollowLast {
			break
		}
		fi, err := os.Lstat(full)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				// Nothing below a missing directory exists yet either.
				return filepath.Join(append([]string{full}, segs[i+1:]...)...), nil
			}
			return "", err
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			return "", fmt.Errorf("%s is a symlink", filepath.Join(segs[:i+1]...))
		}
	}
	return full, nil
}

func errCode(err error) string {
	switch {
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

// putHandler receives a file's bytes into a temporary file and renames it
// into place at the end, so a failed upload leaves nothing behind.
type putHandler struct {
	s      *server
	stream uint32
	tmp    *os.File
	dest   string
	n      int64
	failed bool
}

func (s *server) put(stream uint32, p string, mode uint32) {
	dest, err := s.resolve(p, true)
	if err == nil && isRoot(dest, s.cfg.Workspace) {
		err = errors.New("cannot write a root directory")
	}
	if err != nil {
		s.sendError(stream, errCode(err), err)
		s.setHandler(stream, &putHandler{s: s, stream: stream, failed: true})
		return
	}
	if err := os.MkdirAll(filepath.Dir(dest), 0o755); err != nil {
		s.sendError(stream, errCode(err), err)
		s.setHandler(stream, &putHandler{s: s, stream: stream, failed: true})
		return
	}
	tmp, err := os.CreateTemp(filepath.Dir(dest), ".airlock-put-*")
	if err != nil {
		s.sendError(stream, errCode(err), err)
		s.setHandler(stream, &putHandler{s: s, stream: stream, failed: true})
		return
	}
	if mode == 0 {
		mode = 0o644
	}
	tmp.Chmod(fs.FileMode(mode) & fs.ModePerm)
	s.setHandler(stream, &putHandler{s: s, stream: stream, tmp: tmp, dest: dest})
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
		if err := h.tmp.Close(); err != nil {
			os.Remove(h.tmp.Name())
			h.s.sendError(h.stream, errCode(err), err)
			return
		}
		if err := os.Rename(h.tmp.Name(), h.dest); err != nil {
			os.Remove(h.tmp.Name())
			h.s.sendError(h.stream, errCode(err), err)
			return
		}
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
		h.tmp.Close()
		os.Remove(h.tmp.Name())
		h.tmp = nil
	}
}

func (s *server) get(stream uint32, p string, max int64) {
	full, err := s.resolve(p, true)
	if err != nil {
		s.sendError(stream, errCode(err), err)
		return
	}
	f, err := os.OpenFile(full, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		s.sendError(stream, errCode(err), err)
		return
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		s.sendError(stream, errCode(err), err)
		return
	}
	if !fi.Mode().IsRegular() {
		s.sendError(stream, "invalid", fmt.Errorf("%s is not a regular file", p))
		return
	}
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

func (s *server) list(stream uint32, p string) {
	full, err := s.resolve(p, true)
	if err != nil {
		s.sendError(stream, errCode(err), err)
		return
	}
	d, err := os.Open(full)
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
		fi, err := os.Lstat(filepath.Join(full, n))
		// Invalid UTF-8 would reach the host mangled (and longer).
		if err != nil || len(n) > protocol.MaxNameBytes || !utf8.ValidString(n) {
			continue
		}
		entries = append(entries, fileInfo(n, fi))
	}
	s.respond(stream, protocol.Response{Entries: entries, More: more})
}

func (s *server) stat(stream uint32, p string) {
	full, err := s.resolve(p, true)
	if err != nil {
		s.sendError(stream, errCode(err), err)
		return
	}
	fi, err := os.Lstat(full)
	if err != nil {
		s.sendError(stream, errCode(err), err)
		return
	}
	name := filepath.Base(full)
	if full == s.cfg.Workspace {
		name = "workspace"
	}
	info := fileInfo(name, fi)
	s.respond(stream, protocol.Response{Info: &info})
}

func (s *server) remove(stream uint32, p string) {
	full, err := s.resolve(p, true)
	if err == nil && isRoot(full, s.cfg.Workspace) {
		err = errors.New("cannot remove a root directory")
	}
	if err != nil {
		s.sendError(stream, errCode(err), err)
		return
	}
	if err := os.Remove(full); err != nil {
		s.sendError(stream, errCode(err), err)
		return
	}
	s.respond(stream, protocol.Response{})
}

// isRoot reports whether p is the workspace or another root.
func isRoot(p, workspace string) bool {
	if p == workspace {
		return true
	}
	for _, r := range protocol.Roots {
		if p == r {
			return true
		}
	}
	return false
}
