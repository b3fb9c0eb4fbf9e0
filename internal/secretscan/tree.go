package secretscan

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// Report is what a tree scan found and what it read.
type Report struct {
	// Findings, allowed ones included (Finding.Allowed says so).
	Findings []Finding `json:"findings"`
	Files    int       `json:"files"`
	Bytes    int64     `json:"bytes"`
	// Skipped are the entries not read: larger than the size cap,
	// special files, unreadable ones. Symlinks are never followed and not
	// listed; hard links are read once.
	Skipped  []Skipped     `json:"skipped,omitempty"`
	Duration time.Duration `json:"duration_ns"`
	// Truncated is set when the scan stopped collecting at its findings
	// bound.
	Truncated bool `json:"truncated,omitempty"`
}

// Skipped is an entry a scan did not read, and why.
type Skipped struct {
	Path   string `json:"path"`
	Reason string `json:"reason"`
	// Special is set for device nodes, fifos and sockets: nothing a
	// scan could read.
	Special bool `json:"special,omitempty"`
}

// Err returns a *FoundError naming subject when the report has findings
// that are not allowed, else nil.
func (r *Report) Err(subject string) error { return Refusal(subject, r.Findings) }

// Allowed returns the findings an allow entry covers.
func (r *Report) Allowed() []Finding {
	var out []Finding
	for _, f := range r.Findings {
		if f.Allowed != "" {
			out = append(out, f)
		}
	}
	return out
}

// ScanTree scans every regular file under root. Paths in findings are
// relative to root, with a leading "/" (the path inside a rootfs).
// Symlinks are not followed, so nothing outside root is read; special
// files are skipped; each inode is read once. The scan stops with ctx's
// error when ctx ends.
func (s *Scanner) ScanTree(ctx context.Context, root string, mode Mode) (*Report, error) {
	start := time.Now()
	m := s.matcher(mode)
	rep := &Report{}
	type inode struct{ dev, ino uint64 }
	seen := map[inode]bool{}
	buf := newBuffer(chunkBytes)
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if cerr := ctx.Err(); cerr != nil {
			return cerr
		}
		rel, _ := filepath.Rel(root, p)
		name := "/" + filepath.ToSlash(rel)
		if rel == "." {
			name = "/"
		}
		if err != nil {
			if p == root {
				return err
			}
			rep.Skipped = append(rep.Skipped, Skipped{Path: name, Reason: err.Error()})
			if d != nil && d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		t := d.Type()
		switch {
		case t.IsDir():
			return nil
		case t&fs.ModeSymlink != 0:
			return nil
		case !t.IsRegular():
			rep.Skipped = append(rep.Skipped, Skipped{Path: name, Reason: "not a regular file (" + t.String() + ")", Special: true})
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			rep.Skipped = append(rep.Skipped, Skipped{Path: name, Reason: err.Error()})
			return nil
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			k := inode{uint64(st.Dev), st.Ino}
			if seen[k] {
				return nil
			}
			seen[k] = true
		}
		if fi.Size() > s.cfg.MaxFileBytes {
			rep.Skipped = append(rep.Skipped, Skipped{Path: name, Reason: fmt.Sprintf("%d bytes, more than the %d-byte cap", fi.Size(), s.cfg.MaxFileBytes)})
			return nil
		}
		left := s.cfg.MaxFindings - len(rep.Findings)
		if left <= 0 {
			rep.Truncated = true
			return fs.SkipAll
		}
		found, n, err := s.scanFile(m, p, name, min(left, s.cfg.MaxFindings/10+1), buf)
		rep.Findings = append(rep.Findings, s.allow(found)...)
		rep.Bytes += n
		rep.Files++
		if errors.Is(err, errTooMany) {
			rep.Truncated = true
		} else if err != nil {
			rep.Skipped = append(rep.Skipped, Skipped{Path: name, Reason: err.Error()})
		}
		return nil
	})
	rep.Duration = time.Since(start)
	return rep, err
}

// scanFile opens p without following a symlink and scans at most the
// size cap of it, if it is still a regular file (it may have changed
// since the walk saw it).
func (s *Scanner) scanFile(m *matcher, p, name string, perFile int, buf []byte) ([]Finding, int64, error) {
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, 0, err
	}
	if !fi.Mode().IsRegular() {
		return nil, 0, errors.New("changed into a special file")
	}
	cr := &countingReader{f: f, left: s.cfg.MaxFileBytes}
	found, err := s.scanReader(m, name, cr, perFile, buf)
	return found, cr.n, err
}

// countingReader reads at most left bytes (a file that grows past the cap
// while read is cut there) and counts them.
type countingReader struct {
	f    *os.File
	left int64
	n    int64
}

func (c *countingReader) Read(b []byte) (int, error) {
	if c.left <= 0 {
		return 0, io.EOF
	}
	if int64(len(b)) > c.left {
		b = b[:c.left]
	}
	n, err := c.f.Read(b)
	c.n += int64(n)
	c.left -= int64(n)
	return n, err
}
