package session

import (
	"context"
	"fmt"
	"io/fs"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/agent/protocol"
)

// File operations a front-end that manages files as a file system needs
// beyond put, get, list and delete (the E2B API): stat, mkdir -p, move
// and recursive remove. Paths are checked like every file path of a
// session; the agent walks them without following symlinks.

// fileEntry describes an agent's FileInfo.
func fileEntry(e protocol.FileInfo) airlock.FileEntry {
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
	return airlock.FileEntry{
		Name:    e.Name,
		Type:    typ,
		Size:    e.Size,
		Mode:    fmt.Sprintf("%04o", mode.Perm()),
		ModTime: time.Unix(0, e.MtimeNS).UTC(),
	}
}

// StatFile describes a file or directory of the session. A symlink is
// refused (path-refused), like every symlink on a path.
func (m *Manager) StatFile(ctx context.Context, tenant *airlock.Tenant, id, path string) (*airlock.FileEntry, error) {
	if err := checkPath(path); err != nil {
		return nil, err
	}
	l, end, err := m.begin(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	defer end()
	info, err := l.sb().Agent().Stat(ctx, path)
	if err != nil {
		return nil, m.fileFailure(l, path, err)
	}
	e := fileEntry(*info)
	return &e, nil
}

// MakeDir makes a directory of the session and its missing parents. One
// already there is a file-exists problem (409).
func (m *Manager) MakeDir(ctx context.Context, tenant *airlock.Tenant, id, path string) (*airlock.FileEntry, error) {
	if err := checkPath(path); err != nil {
		return nil, err
	}
	l, end, err := m.begin(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	defer end()
	info, err := l.sb().Agent().Mkdir(ctx, path)
	if err != nil {
		return nil, m.fileFailure(l, path, err)
	}
	e := fileEntry(*info)
	return &e, nil
}

// MoveFile renames a file or directory of the session (missing parents
// of dst are made) and describes it at dst.
func (m *Manager) MoveFile(ctx context.Context, tenant *airlock.Tenant, id, src, dst string) (*airlock.FileEntry, error) {
	if err := checkPath(src); err != nil {
		return nil, err
	}
	if err := checkPath(dst); err != nil {
		return nil, err
	}
	l, end, err := m.begin(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	defer end()
	info, err := l.sb().Agent().Move(ctx, src, dst)
	if err != nil {
		return nil, m.fileFailure(l, src, err)
	}
	e := fileEntry(*info)
	return &e, nil
}

// RemoveAll removes a file, or a directory with everything below it, of
// the session.
func (m *Manager) RemoveAll(ctx context.Context, tenant *airlock.Tenant, id, path string) error {
	if err := checkPath(path); err != nil {
		return err
	}
	l, end, err := m.begin(ctx, tenant, id)
	if err != nil {
		return err
	}
	defer end()
	if err := l.sb().Agent().RemoveAll(ctx, path); err != nil {
		return m.fileFailure(l, path, err)
	}
	return nil
}
