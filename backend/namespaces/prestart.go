package namespaces

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// maxReadyImages bounds the images sandboxes are kept started for: those
// used last.
const maxReadyImages = 4

// prestarter keeps a few sandboxes started ahead of time per image: the
// init stage runs in its new namespaces and waits, blocked on its config
// pipe, with no disk, cgroup or request yet. Taking one saves starting
// a process into new namespaces and the Go runtime of the init stage.
// One serves one sandbox. If the server dies, the config pipe closes
// and they exit by themselves.
type prestarter struct {
	b    *Backend
	want int

	mu     sync.Mutex
	ready  map[string][]*Sandbox // by image rootfs
	making map[string]int
	recent []string // rootfs, least recently used first
	closed bool
	bg     inflight
}

func newPrestarter(b *Backend, want int) *prestarter {
	return &prestarter{b: b, want: want, ready: map[string][]*Sandbox{}, making: map[string]int{}}
}

// take returns a started sandbox for rootfs, or nil, and starts another
// in the background.
func (p *prestarter) take(rootfs string) *Sandbox {
	if p.want == 0 {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.touchLocked(rootfs)
	var stale []*Sandbox
	var s *Sandbox
	for len(p.ready[rootfs]) > 0 && s == nil {
		n := len(p.ready[rootfs])
		c := p.ready[rootfs][n-1]
		p.ready[rootfs] = p.ready[rootfs][:n-1]
		select {
		case <-c.exited:
			stale = append(stale, c) // died waiting
		default:
			s = c
		}
	}
	p.refillLocked(rootfs)
	for _, c := range stale {
		go c.Destroy(context.Background())
	}
	return s
}

// touchLocked marks rootfs used and stops keeping sandboxes for the
// image used longest ago beyond maxReadyImages.
func (p *prestarter) touchLocked(rootfs string) {
	for i, r := range p.recent {
		if r == rootfs {
			p.recent = append(p.recent[:i], p.recent[i+1:]...)
			break
		}
	}
	p.recent = append(p.recent, rootfs)
	for len(p.recent) > maxReadyImages {
		old := p.recent[0]
		p.recent = p.recent[1:]
		for _, s := range p.ready[old] {
			go s.Destroy(context.Background())
		}
		delete(p.ready, old)
	}
}

func (p *prestarter) refillLocked(rootfs string) {
	if p.closed {
		return
	}
	for len(p.ready[rootfs])+p.making[rootfs] < p.want {
		p.making[rootfs]++
		p.bg.add()
		go func() {
			defer p.bg.done()
			s, err := p.b.spawnNew(rootfs)
			p.mu.Lock()
			defer p.mu.Unlock()
			p.making[rootfs]--
			if err != nil {
				return // the next take starts its sandbox itself and tries again
			}
			keep := !p.closed
			if keep {
				keep = false
				for _, r := range p.recent {
					keep = keep || r == rootfs
				}
			}
			if !keep {
				go s.Destroy(context.Background())
				return
			}
			p.ready[rootfs] = append(p.ready[rootfs], s)
		}()
	}
}

// pids lists the host processes of the sandboxes kept ready.
func (p *prestarter) pids() []int {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []int
	for _, ss := range p.ready {
		for _, s := range ss {
			out = append(out, s.cmd.Process.Pid)
		}
	}
	return out
}

// close ends the sandboxes kept ready and stops starting more.
func (p *prestarter) close() error {
	p.mu.Lock()
	p.closed = true
	var all []*Sandbox
	for _, ss := range p.ready {
		all = append(all, ss...)
	}
	p.ready = map[string][]*Sandbox{}
	p.mu.Unlock()
	p.bg.wait()
	var errs []error
	for _, s := range all {
		errs = append(errs, s.Destroy(context.Background()))
	}
	return errors.Join(errs...)
}

// reconcile removes the logs of ready sandboxes an earlier run left
// (their processes exited when that run's config pipes closed).
func (p *prestarter) reconcile() error {
	entries, err := os.ReadDir(p.b.cfg.readyDir())
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	p.mu.Lock()
	mine := map[string]bool{}
	for _, ss := range p.ready {
		for _, s := range ss {
			mine[filepath.Base(s.logPath)] = true
		}
	}
	making := 0
	for _, n := range p.making {
		making += n
	}
	p.mu.Unlock()
	if making > 0 {
		return nil // one of those files may be being made now
	}
	var errs []error
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".log") && !mine[e.Name()] {
			if err := os.Remove(filepath.Join(p.b.cfg.readyDir(), e.Name())); err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}
