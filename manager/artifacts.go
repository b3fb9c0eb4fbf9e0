package manager

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
	"path/filepath"
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
	walk(dir, func(rel string, fi fs.FileInfo) bool {
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

// walk calls fn for every regular file under root, never following a
// symlink, in lexical order. fn returns false to stop.
func walk(root string, fn func(rel string, fi fs.FileInfo) bool) {
	seen := 0
	var visit func(dir, rel string, depth int) bool
	visit = func(dir, rel string, depth int) bool {
		if depth > maxWalkDepth {
			return true
		}
		entries, err := os.ReadDir(dir)
		if err != nil {
			return true
		}
		for _, e := range entries {
			seen++
			if seen > maxWalkEntries {
				return false
			}
			full := filepath.Join(dir, e.Name())
			r := path.Join(rel, e.Name())
			fi, err := os.Lstat(full)
			if err != nil {
				continue
			}
			switch {
			case fi.IsDir():
				if !visit(full, r, depth+1) {
					return false
				}
			case fi.Mode().IsRegular():
				if !fn(r, fi) {
					return false
				}
			}
			// Symlinks, FIFOs, sockets and devices are never artifacts.
		}
		return true
	}
	visit(root, "", 0)
}

// collect stores every regular file under dir that is new or changed since
// before, within the caps. The sandbox must be stopped: nothing inside can
// change the files any more. It returns the artifacts and whether some
// files were left out.
func (m *Manager) collect(ctx context.Context, e *airlock.Execution, dir string, before map[string]fileState) ([]airlock.Artifact, bool, error) {
	var out []airlock.Artifact
	var total int64
	truncated := false
	var ferr error
	walk(dir, func(rel string, fi fs.FileInfo) bool {
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
		a, err := m.storeArtifact(ctx, e, dir, rel)
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

// storeArtifact copies one file into the blob store.
func (m *Manager) storeArtifact(ctx context.Context, e *airlock.Execution, dir, rel string) (*airlock.Artifact, error) {
	f, err := openBeneath(dir, rel)
	if err != nil {
		return nil, errSkip
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		return nil, errSkip
	}
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

// openBeneath opens dir/rel for reading, refusing symlinks anywhere on the
// way and anything that is not a regular file (a FIFO would block).
func openBeneath(dir, rel string) (*os.File, error) {
	cur := dir
	parts := strings.Split(rel, "/")
	for i, p := range parts {
		cur = filepath.Join(cur, p)
		fi, err := os.Lstat(cur)
		if err != nil {
			return nil, err
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			return nil, fmt.Errorf("symlink on path")
		}
		if i < len(parts)-1 && !fi.IsDir() {
			return nil, fmt.Errorf("not a directory")
		}
		if i == len(parts)-1 && !fi.Mode().IsRegular() {
			return nil, fmt.Errorf("not a regular file")
		}
	}
	return os.OpenFile(cur, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
}

// contentType picks a content type by extension, else by sniffing.
func contentType(name string, head []byte) string {
	if t := mime.TypeByExtension(strings.ToLower(path.Ext(name))); t != "" {
		return t
	}
	return http.DetectContentType(head)
}
