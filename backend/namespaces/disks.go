package namespaces

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/airlockhq/airlock/internal/loopdisk"
)

// disks hands out sandbox disks: a run directory holding a freshly
// formatted disk image mounted at disk/, with disk/workspace and disk/tmp
// made. Making one (copying the template, attaching a loop device,
// mounting ext4) takes a few milliseconds, so a few are kept ready per
// disk size and made again in the background as they are taken. A disk
// serves one sandbox and is destroyed with it; none is ever reused.
type disks struct {
	templates *loopdisk.Templates
	dir       string // where ready disks wait
	want      int    // ready disks kept per size

	mu     sync.Mutex
	ready  map[int64][]string
	making map[int64]int
	owned  map[string]bool // directories of ready disks and of those being made
	closed bool
	bg     inflight // disks being made, run directories being deleted
	ctx    context.Context
	cancel context.CancelFunc
}

func newDisks(templates *loopdisk.Templates, dir string, want int) *disks {
	ctx, cancel := context.WithCancel(context.Background())
	return &disks{templates: templates, dir: dir, want: want, ready: map[int64][]string{}, making: map[int64]int{}, owned: map[string]bool{}, ctx: ctx, cancel: cancel}
}

// take makes runDir (which must not exist) a run directory with a fresh
// disk of size bytes: a ready one renamed into place, or one made now.
func (d *disks) take(ctx context.Context, runDir string, size int64) error {
	d.mu.Lock()
	var spare string
	if n := len(d.ready[size]); n > 0 {
		spare = d.ready[size][n-1]
		d.ready[size] = d.ready[size][:n-1]
	}
	d.refillLocked(size)
	d.mu.Unlock()
	if spare != "" {
		// The mount at spare/disk moves with its directory.
		err := os.Rename(spare, runDir)
		d.disown(spare)
		if err == nil {
			return nil
		}
		removeDisk(spare)
	}
	if err := os.Mkdir(runDir, 0o700); err != nil {
		return fmt.Errorf("namespaces: %w", err)
	}
	return d.make(ctx, runDir, size)
}

// make formats and mounts a disk in the existing directory dir.
func (d *disks) make(ctx context.Context, dir string, size int64) error {
	disk := filepath.Join(dir, "disk")
	if err := os.Mkdir(disk, 0o700); err != nil {
		return fmt.Errorf("namespaces: %w", err)
	}
	img := filepath.Join(dir, "disk.img")
	if err := d.templates.Create(ctx, img, size); err != nil {
		return err
	}
	if err := loopdisk.Mount(ctx, disk, img); err != nil {
		return err
	}
	if err := os.Mkdir(filepath.Join(disk, "workspace"), 0o755); err != nil {
		return fmt.Errorf("namespaces: %w", err)
	}
	tmp := filepath.Join(disk, "tmp")
	if err := os.Mkdir(tmp, 0o777); err != nil {
		return fmt.Errorf("namespaces: %w", err)
	}
	if err := os.Chmod(tmp, 0o777|os.ModeSticky); err != nil {
		return fmt.Errorf("namespaces: %w", err)
	}
	return nil
}

// refillLocked starts making ready disks of size up to want; d.mu is held.
func (d *disks) refillLocked(size int64) {
	if d.closed {
		return
	}
	for len(d.ready[size])+d.making[size] < d.want {
		d.making[size]++
		d.bg.add()
		go func() {
			defer d.bg.done()
			dir, err := d.makeSpare(size)
			d.mu.Lock()
			defer d.mu.Unlock()
			d.making[size]--
			if err != nil {
				return // the next take makes its disk itself and tries again
			}
			if d.closed {
				removeDisk(dir)
				delete(d.owned, dir)
				return
			}
			d.ready[size] = append(d.ready[size], dir)
		}()
	}
}

func (d *disks) makeSpare(size int64) (string, error) {
	if err := os.MkdirAll(d.dir, 0o700); err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp(d.dir, "disk-")
	if err != nil {
		return "", err
	}
	d.mu.Lock()
	d.owned[dir] = true
	d.mu.Unlock()
	if err := d.make(d.ctx, dir, size); err != nil {
		removeDisk(dir)
		d.disown(dir)
		return "", err
	}
	return dir, nil
}

func (d *disks) disown(dir string) {
	d.mu.Lock()
	delete(d.owned, dir)
	d.mu.Unlock()
}

// reconcile removes ready disks an earlier run left, and whatever the
// background deletes of destroyed sandboxes' run directories did not.
func (d *disks) reconcile() error {
	d.bg.wait()
	entries, err := os.ReadDir(d.dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range entries {
		dir := filepath.Join(d.dir, e.Name())
		d.mu.Lock()
		mine := d.owned[dir]
		d.mu.Unlock()
		if !mine {
			errs = append(errs, removeDisk(dir))
		}
	}
	return errors.Join(errs...)
}

// close stops making disks and removes the ready ones.
func (d *disks) close() error {
	d.mu.Lock()
	d.closed = true
	d.cancel()
	var dirs []string
	for _, ds := range d.ready {
		dirs = append(dirs, ds...)
	}
	d.ready = map[int64][]string{}
	d.mu.Unlock()
	d.bg.wait()
	var errs []error
	for _, dir := range dirs {
		errs = append(errs, removeDisk(dir))
		d.disown(dir)
	}
	return errors.Join(errs...)
}

// discard ends the run directory of a destroyed sandbox, whose processes
// are all gone: it unmounts its disk, then moves the directory out of the
// way and deletes it (freeing the disk image's blocks, milliseconds) in
// the background. Close, CheckClean and reconcile wait for that.
func (d *disks) discard(dir string) error {
	if err := loopdisk.UnmountAll(dir); err != nil {
		return err // never remove a directory with a mount still in it
	}
	trash := filepath.Join(d.dir, "trash-"+filepath.Base(dir))
	if err := os.MkdirAll(d.dir, 0o700); err != nil || os.Rename(dir, trash) != nil {
		return os.RemoveAll(dir)
	}
	d.bg.add()
	go func() {
		defer d.bg.done()
		os.RemoveAll(trash)
	}()
	return nil
}

// wait waits until no disk is being made or deleted.
func (d *disks) wait() { d.bg.wait() }

// removeDisk unmounts whatever is mounted below dir and removes it.
func removeDisk(dir string) error {
	if err := loopdisk.UnmountAll(dir); err != nil {
		return err // never remove a directory with a mount still in it
	}
	return os.RemoveAll(dir)
}

// inflight counts background work. Unlike a WaitGroup, work may start
// while someone waits: wait returns once the count has reached zero.
type inflight struct {
	mu   sync.Mutex
	n    int
	idle chan struct{} // closed while n is zero; nil before first use
}

func (f *inflight) add() {
	f.mu.Lock()
	if f.n == 0 {
		f.idle = make(chan struct{})
	}
	f.n++
	f.mu.Unlock()
}

func (f *inflight) done() {
	f.mu.Lock()
	f.n--
	if f.n == 0 {
		close(f.idle)
	}
	f.mu.Unlock()
}

func (f *inflight) wait() {
	f.mu.Lock()
	ch := f.idle
	f.mu.Unlock()
	if ch != nil {
		<-ch
	}
}
