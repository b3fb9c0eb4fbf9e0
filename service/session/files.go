package session

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"sort"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/agent/protocol"
)

// checkPath refuses, before anything reaches the sandbox, a path that
// leaves the workspace (and /tmp): "..", NUL bytes, absolute paths
// elsewhere. Symlinks and hard links are refused inside, by the agent.
func checkPath(p string) error {
	if p == "" {
		return airlock.Problem(airlock.EINVALID, "invalid-path", "path is required (relative to /workspace, or absolute under /workspace or /tmp)")
	}
	if _, _, err := protocol.CleanPath(p); err != nil {
		return airlock.Problem(airlock.EINVALID, "invalid-path", "path %q is refused: it must stay inside /workspace or /tmp (relative paths are relative to /workspace)", short(p))
	}
	return nil
}

// short bounds a path quoted in a message.
func short(s string) string {
	if len(s) > 200 {
		return s[:200] + "..."
	}
	return s
}

// fileError turns an agent's answer to a file request into an API error.
func fileError(p string, err error) error {
	p = fmt.Sprintf("%q", short(p))
	var re *protocol.RemoteError
	if !errors.As(err, &re) {
		return err
	}
	switch re.Code {
	case "not_found":
		return airlock.Problem(airlock.ENOTFOUND, "file-not-found", "%s: no such file or directory", p)
	case "refused":
		return airlock.Problem(airlock.EFORBIDDEN, "path-refused", "%s is refused: symlinks, hard links and special files are not followed or served", p)
	case "no_space":
		return airlock.Problem(airlock.ETOOLARGE, "disk-full", "the session's disk is full; the upload was discarded and nothing was written to %s", p)
	case "too_large":
		return airlock.Problem(airlock.ECONFLICT, "file-changed", "%s changed while it was read; try again", p)
	case "not_empty":
		return airlock.Problem(airlock.ECONFLICT, "directory-not-empty", "%s is a directory that is not empty", p)
	case "permission":
		return airlock.Problem(airlock.EFORBIDDEN, "permission-denied", "%s: permission denied in the sandbox", p)
	case "exists":
		return airlock.Problem(airlock.ECONFLICT, "file-exists", "%s exists", p)
	case "invalid":
		return airlock.Problem(airlock.EINVALID, "invalid-path", "%s: %s", p, re.Message)
	}
	return &airlock.Error{Code: airlock.EINTERNAL, Message: "file request failed", Err: err}
}

// countingReader counts what was read, and keeps the API error a read
// failed with (an upload cut off by its front end for its rate, say).
type countingReader struct {
	r   io.Reader
	n   int64
	err *airlock.Error
}

func (c *countingReader) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	c.n += int64(n)
	var ae *airlock.Error
	if err != nil && errors.As(err, &ae) {
		c.err = ae
	}
	return n, err
}

// PutFile streams r into a file of the session (replacing it, making
// missing directories). The agent writes a temporary file and renames it
// at the end, so a failed upload (disk full, client gone) leaves no
// partial file. size, if not negative, is the announced size: more than
// the session's disk is refused before anything is sent. A session takes
// Config.MaxUploads uploads at once; one more is refused (429
// too-many-uploads, with Retry-After).
func (m *Manager) PutFile(ctx context.Context, tenant *airlock.Tenant, id, path string, size int64, r io.Reader) (*airlock.PutFileResult, error) {
	if err := checkPath(path); err != nil {
		return nil, err
	}
	l, end, err := m.begin(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	defer end()
	l.mu.Lock()
	disk, sb := l.rec.Limits.DiskBytes, l.sb()
	busy := l.uploads >= m.cfg.MaxUploads
	if !busy {
		l.uploads++
	}
	l.mu.Unlock()
	if busy {
		return nil, airlock.Problem(airlock.ERATELIMITED, "too-many-uploads",
			"session %s has %d uploads in progress, the most it takes at once; retry when one has finished", id, m.cfg.MaxUploads).RetryLater(time.Second)
	}
	defer func() {
		l.mu.Lock()
		l.uploads--
		l.mu.Unlock()
	}()
	if size > disk {
		return nil, airlock.Problem(airlock.ETOOLARGE, "file-too-large", "the file is %d bytes; the session's disk holds %d", size, disk)
	}
	cr := &countingReader{r: r}
	n, err := sb.Agent().Put(ctx, path, 0o644, cr)
	l.mu.Lock()
	l.rec.Usage.BytesUploaded += cr.n
	l.mu.Unlock()
	if err != nil {
		var re *protocol.RemoteError
		if errors.As(err, &re) {
			return nil, fileError(path, err)
		}
		if cr.err != nil {
			// The body failed with an API error of its own.
			return nil, cr.err
		}
		if ctx.Err() != nil || cr.n > 0 && !errors.Is(err, protocol.ErrClosed) {
			// The upload itself broke (client gone, body cut short).
			return nil, airlock.Problem(airlock.EINVALID, "upload-incomplete", "the upload of %q ended early; nothing was written", short(path))
		}
		return nil, m.failure(l, err)
	}
	return &airlock.PutFileResult{Path: path, Size: n}, nil
}

// lazyWriter opens its writer at the first byte (or at the end for an
// empty file), so an error before any data is still a clean problem.
type lazyWriter struct {
	open func() io.Writer
	w    io.Writer
}

func (l *lazyWriter) Write(b []byte) (int, error) {
	if l.w == nil {
		l.w = l.open()
	}
	return l.w.Write(b)
}

// GetFile streams a file of the session to the writer open returns; open
// is called with the file's size once the file is known to be readable.
func (m *Manager) GetFile(ctx context.Context, tenant *airlock.Tenant, id, path string, open func(size int64) io.Writer) (int64, error) {
	if err := checkPath(path); err != nil {
		return 0, err
	}
	l, end, err := m.begin(ctx, tenant, id)
	if err != nil {
		return 0, err
	}
	defer end()
	agent := l.sb().Agent()
	info, err := agent.Stat(ctx, path)
	if err != nil {
		return 0, m.fileFailure(l, path, err)
	}
	if info.IsDir {
		return 0, airlock.Problem(airlock.EINVALID, "is-a-directory", "%q is a directory; list it with ?list=1", short(path))
	}
	lw := &lazyWriter{open: func() io.Writer { return open(info.Size) }}
	n, err := agent.Get(ctx, path, lw, max(info.Size, 1))
	l.mu.Lock()
	l.rec.Usage.BytesDownload += n
	l.mu.Unlock()
	if err != nil {
		return n, m.fileFailure(l, path, err)
	}
	if lw.w == nil {
		lw.open()
	}
	return n, nil
}

func (m *Manager) fileFailure(l *live, path string, err error) error {
	var re *protocol.RemoteError
	if errors.As(err, &re) {
		return fileError(path, err)
	}
	return m.failure(l, err)
}

// ListFiles lists a directory of the session (at most 1000 entries).
func (m *Manager) ListFiles(ctx context.Context, tenant *airlock.Tenant, id, path string) (*airlock.FileList, error) {
	if path == "" {
		path = "."
	}
	if err := checkPath(path); err != nil {
		return nil, err
	}
	l, end, err := m.begin(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	defer end()
	entries, more, err := l.sb().Agent().List(ctx, path)
	if err != nil {
		var re *protocol.RemoteError
		if errors.As(err, &re) && re.Code == "refused" {
			return nil, airlock.Problem(airlock.EINVALID, "not-a-directory", "%q is not a directory (or is a symlink)", short(path))
		}
		return nil, m.fileFailure(l, path, err)
	}
	out := &airlock.FileList{Path: path, Entries: make([]airlock.FileEntry, 0, len(entries)), Truncated: more}
	for _, e := range entries {
		mode := fs.FileMode(e.Mode)
		typ := "other"
		switch {
		case mode.IsRegular():
			typ = "file"
		case mode.IsDir():
			typ = "dir"
		case mode&fs.ModeSymlink != 0:
			typ = "symlink"
		}
		out.Entries = append(out.Entries, airlock.FileEntry{
			Name:    e.Name,
			Type:    typ,
			Size:    e.Size,
			Mode:    fmt.Sprintf("%04o", mode.Perm()),
			ModTime: time.Unix(0, e.MtimeNS).UTC(),
		})
	}
	sort.Slice(out.Entries, func(i, j int) bool { return out.Entries[i].Name < out.Entries[j].Name })
	return out, nil
}

// DeleteFile removes a file or an empty directory of the session.
func (m *Manager) DeleteFile(ctx context.Context, tenant *airlock.Tenant, id, path string) error {
	if err := checkPath(path); err != nil {
		return err
	}
	l, end, err := m.begin(ctx, tenant, id)
	if err != nil {
		return err
	}
	defer end()
	if err := l.sb().Agent().Remove(ctx, path); err != nil {
		return m.fileFailure(l, path, err)
	}
	return nil
}
