package oneshot

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"mime"
	"net/http"
	"os"
	"path"
	"slices"
	"strings"
	"syscall"

	"github.com/airlockhq/airlock"
)

// maxWalkEntries bounds how many directory entries collection looks at.
const maxWalkEntries = 100000

// maxWalkDepth bounds directory nesting during collection.
const maxWalkDepth = 64

// fileState identifies a file's content well enough to see a change.
type fileState struct {
	size  int64
	mtime int64
	ino   uint64
}

// snapshotDir records the state of every regular file under dir, so that
// collect can tell new and changed files from old ones.
func snapshotDir(dir string) map[string]fileState {
	out := map[string]fileState{}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return out
	}
	defer root.Close()
	walk(root, func(rel string, fi fs.FileInfo) bool {
		out[rel] = stateOf(fi)
		return true
	})
	return out
}

func stateOf(fi fs.FileInfo) fileState {
	st := fileState{size: fi.Size(), mtime: fi.ModTime().UnixNano()}
	if sys, ok := fi.Sys().(*syscall.Stat_t); ok {
		st.ino = sys.Ino
	}
	return st
}

// walk calls fn for every regular file beneath root, never following a
// symlink, in lexical order. fn returns false to stop.
//
// The workspace is hostile: its code may have left symlinks anywhere and,
// were it still running, could swap a directory for a symlink at any
// moment. So no path is resolved from the host's root: each directory is
// opened through the os.Root of its parent, checked to be the directory
// that was stat'ed (not a symlink swapped in since), listed through its
// own descriptor, and its entries are stat'ed relative to it.
func walk(root *os.Root, fn func(rel string, fi fs.FileInfo) bool) {
	w := walker{fn: fn}
	w.visit(root, "", 0)
}

type walker struct {
	fn   func(rel string, fi fs.FileInfo) bool
	seen int
}

// visit walks the directory dir, named rel beneath the workspace. It
// returns false when the walk is to stop.
func (w *walker) visit(dir *os.Root, rel string, depth int) bool {
	names, ok := w.list(dir)
	for _, name := range names {
		r := path.Join(rel, name)
		fi, err := dir.Lstat(name)
		if err != nil {
			continue
		}
		switch {
		case fi.IsDir():
			if depth+1 > maxWalkDepth {
				continue
			}
			sub, err := openDirBeneath(dir, name, fi)
			if err != nil {
				continue
			}
			more := w.visit(sub, r, depth+1)
			sub.Close()
			if !more {
				return false
			}
		case fi.Mode().IsRegular():
			if !w.fn(r, fi) {
				return false
			}
		}
		// Symlinks, FIFOs, sockets and devices are never artifacts.
	}
	return ok
}

// list returns the names in dir, sorted, counting them against
// maxWalkEntries; ok is false when that bound was reached (names then
// holds those within it).
func (w *walker) list(dir *os.Root) (names []string, ok bool) {
	f, err := dir.Open(".")
	if err != nil {
		return nil, true
	}
	defer f.Close()
	for {
		batch, err := f.ReadDir(256)
		for _, e := range batch {
			if w.seen >= maxWalkEntries {
				slices.Sort(names)
				return names, false
			}
			w.seen++
			names = append(names, e.Name())
		}
		if err != nil || len(batch) == 0 {
			break
		}
	}
	slices.Sort(names)
	return names, true
}

// openDirBeneath opens the directory name in dir as a root of its own,
// and only if it is the directory fi describes: a symlink put in its place
// after the Lstat (which os.Root would follow if it stays beneath the
// workspace) is refused.
func openDirBeneath(dir *os.Root, name string, fi fs.FileInfo) (*os.Root, error) {
	sub, err := dir.OpenRoot(name)
	if err != nil {
		return nil, err
	}
	got, err := sub.Stat(".")
	if err != nil || !got.IsDir() || !os.SameFile(fi, got) {
		sub.Close()
		return nil, fmt.Errorf("%s changed while it was opened", name)
	}
	return sub, nil
}

// collect stores every regular file under dir that is new or changed since
// before, within the caps. The sandbox must be stopped: nothing inside can
// change the files any more. It returns the artifacts and whether some
// files were left out.
func (m *Manager) collect(ctx context.Context, e *airlock.Execution, dir string, before map[string]fileState) ([]airlock.Artifact, bool, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		// As with an unreadable directory inside it: nothing to collect.
		return nil, false, nil
	}
	defer root.Close()
	var out []airlock.Artifact
	var total int64
	truncated := false
	var ferr error
	walk(root, func(rel string, fi fs.FileInfo) bool {
		if old, ok := before[rel]; ok && old == stateOf(fi) {
			return true
		}
		if len(out) >= m.cfg.MaxArtifacts {
			truncated = true
			return false
		}
		if fi.Size() > m.cfg.MaxArtifactBytes || total+fi.Size() > m.cfg.MaxArtifactsTotal {
			truncated = true
			return true
		}
		a, err := m.storeArtifact(ctx, e, root, rel)
		if err != nil {
			if errors.Is(err, errSkip) {
				truncated = true
				return true
			}
			ferr = err
			return false
		}
		total += a.SizeBytes
		out = append(out, *a)
		return true
	})
	return out, truncated, ferr
}

var errSkip = errors.New("skip file")

// storeArtifact copies the file rel beneath root into the blob store.
func (m *Manager) storeArtifact(ctx context.Context, e *airlock.Execution, root *os.Root, rel string) (*airlock.Artifact, error) {
	f, err := openBeneath(root, rel)
	if err != nil {
		return nil, errSkip
	}
	defer f.Close()
	a := &airlock.Artifact{
		ID:          m.cfg.NewID(),
		ExecutionID: e.ID,
		TenantID:    e.TenantID,
		Filename:    rel,
	}
	head := make([]byte, 512)
	n, _ := io.ReadFull(f, head)
	a.ContentType = contentType(rel, head[:n])
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return nil, errSkip
	}
	h := sha256.New()
	lr := &io.LimitedReader{R: f, N: m.cfg.MaxArtifactBytes + 1}
	size, err := m.cfg.Blobs.Put(ctx, airlock.ArtifactBlobKey(a), io.TeeReader(lr, h))
	if err != nil {
		return nil, fmt.Errorf("manager: store artifact %q: %w", rel, err)
	}
	if size > m.cfg.MaxArtifactBytes {
		m.cfg.Blobs.Delete(ctx, airlock.ArtifactBlobKey(a))
		return nil, errSkip
	}
	a.SizeBytes = size
	a.SHA256 = hex.EncodeToString(h.Sum(nil))
	return a, nil
}

// openBeneath opens the regular file rel (slash-separated, as walk reports
// it) beneath root for reading. Each directory on the way is opened
// through the root of its parent and must be the directory an Lstat saw,
// so a symlink anywhere on the way is refused rather than followed (even
// one pointing back into the workspace); the file is opened with
// O_NOFOLLOW and O_NONBLOCK (a FIFO swapped in never blocks) and must be
// the regular file the Lstat saw.
func openBeneath(root *os.Root, rel string) (*os.File, error) {
	parts := strings.Split(rel, "/")
	dir := root
	defer func() {
		if dir != root {
			dir.Close()
		}
	}()
	for _, p := range parts[:len(parts)-1] {
		fi, err := dir.Lstat(p)
		if err != nil {
			return nil, err
		}
		if !fi.IsDir() {
			return nil, fmt.Errorf("%s: not a directory", p)
		}
		sub, err := openDirBeneath(dir, p, fi)
		if err != nil {
			return nil, err
		}
		if dir != root {
			dir.Close()
		}
		dir = sub
	}
	name := parts[len(parts)-1]
	fi, err := dir.Lstat(name)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file", name)
	}
	f, err := dir.OpenFile(name, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	got, err := f.Stat()
	if err != nil || !got.Mode().IsRegular() || !os.SameFile(fi, got) {
		f.Close()
		return nil, fmt.Errorf("%s changed while it was opened", name)
	}
	return f, nil
}

// contentType picks a content type by extension, else by sniffing.
func contentType(name string, head []byte) string {
	if t := mime.TypeByExtension(strings.ToLower(path.Ext(name))); t != "" {
		return t
	}
	return http.DetectContentType(head)
}
