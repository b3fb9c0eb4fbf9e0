package template

import (
	"context"
	"errors"
	"io"
	"os"
	"sync"
)

// maxLogBytes bounds a build log: past it, writes are dropped and one
// line says so.
const maxLogBytes = 8 << 20

// buildLog is one template's build log: a file, appended to while the
// build runs, readable by any number of followers at once.
type buildLog struct {
	path string

	mu     sync.Mutex
	f      *os.File
	size   int64
	done   bool
	full   bool
	notify chan struct{} // closed and replaced at every write and at close
}

func newBuildLog(path string) (*buildLog, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	return &buildLog{path: path, f: f, notify: make(chan struct{})}, nil
}

// Write appends p; it never fails the build.
func (l *buildLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.done || l.full {
		return len(p), nil
	}
	if l.size+int64(len(p)) > maxLogBytes {
		l.full = true
		p = []byte("\n[the build log is over 8 MiB: the rest is not kept]\n")
	}
	n, _ := l.f.Write(p)
	l.size += int64(n)
	close(l.notify)
	l.notify = make(chan struct{})
	return len(p), nil
}

// Close ends the log: followers read to its end and get io.EOF.
func (l *buildLog) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.done {
		return nil
	}
	l.done = true
	close(l.notify)
	return l.f.Close()
}

// state returns the size written so far, whether the log is over, and a
// channel closed at the next change.
func (l *buildLog) state() (int64, bool, <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.size, l.done, l.notify
}

// follower reads a log from its start, waiting for more until it ends.
type follower struct {
	ctx  context.Context
	log  *buildLog // nil: a finished log, read to its end
	f    *os.File
	read int64
}

// openLog opens the log at path; live, when not nil, is the build's own
// log, followed until it ends.
func openLog(ctx context.Context, path string, live *buildLog) (io.ReadCloser, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	return &follower{ctx: ctx, log: live, f: f}, nil
}

func (r *follower) Read(p []byte) (int, error) {
	for {
		if r.log == nil {
			n, err := r.f.Read(p)
			r.read += int64(n)
			return n, err
		}
		size, done, changed := r.log.state()
		if r.read < size {
			if int64(len(p)) > size-r.read {
				p = p[:size-r.read]
			}
			n, err := r.f.Read(p)
			r.read += int64(n)
			if errors.Is(err, io.EOF) && n > 0 {
				err = nil
			}
			return n, err
		}
		if done {
			r.log = nil
			continue
		}
		select {
		case <-changed:
		case <-r.ctx.Done():
			return 0, r.ctx.Err()
		}
	}
}

func (r *follower) Close() error { return r.f.Close() }
