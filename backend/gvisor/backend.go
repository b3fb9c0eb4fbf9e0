package gvisor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sync"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/cgroups"
	"github.com/airlockhq/airlock/internal/leftovers"
	"github.com/airlockhq/airlock/internal/loopdisk"
)

// Backend runs sandboxes under runsc.
type Backend struct {
	cfg     Config
	cgroups cgroups.Manager
	disks   *loopdisk.Templates // formatted once per size, copied per sandbox
	deleter *deleter            // batches `runsc delete` of destroyed sandboxes

	mu   sync.Mutex
	live map[string]*Sandbox
}

var _ airlock.Backend = (*Backend)(nil)

// New returns a backend. It creates its directories but starts nothing.
func New(cfg Config) (*Backend, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	for _, d := range []string{cfg.runscRoot(), cfg.sandboxesDir()} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("gvisor: %w", err)
		}
	}
	becomeSubreaper()
	b := &Backend{
		cfg: cfg, cgroups: cgroups.Detect(), live: map[string]*Sandbox{},
		disks: &loopdisk.Templates{Dir: filepath.Join(cfg.StateDir, "disks")},
	}
	b.deleter = &deleter{b: b}
	return b, nil
}

// Name is the backend's name in configs and records.
func (b *Backend) Name() string { return "gvisor" }

// Capabilities of gVisor on this backend.
func (b *Backend) Capabilities() airlock.Capabilities {
	return airlock.Capabilities{
		HardwareIsolation: false,
		NetworkModes:      []string{airlock.NetworkNone, airlock.NetworkAllowList},
		RequiresRoot:      true,
		SeparateKernel:    true, // the gVisor kernel stands between code and host
		Volumes:           true,
	}
}

var validID = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_-]{0,63}$`)

func (b *Backend) cgroupPath(id string) string { return filepath.Join(b.cfg.CgroupParent, id) }

// Create makes and starts a sandbox and waits for its agent's hello.
func (b *Backend) Create(ctx context.Context, spec airlock.SandboxSpec) (airlock.Sandbox, error) {
	return b.create(ctx, spec, "")
}

func (b *Backend) create(ctx context.Context, spec airlock.SandboxSpec, from string) (airlock.Sandbox, error) {
	return b.createWith(ctx, spec, from, "")
}

// createWith makes a sandbox; disk, when set, is the disk image of a
// paused sandbox to mount instead of a fresh one (see pause.go).
func (b *Backend) createWith(ctx context.Context, spec airlock.SandboxSpec, from, disk string) (airlock.Sandbox, error) {
	if !validID.MatchString(spec.ID) {
		return nil, fmt.Errorf("gvisor: invalid sandbox id %q", spec.ID)
	}
	if spec.Image == nil || spec.Image.Rootfs == "" {
		return nil, fmt.Errorf("gvisor: sandbox %s has no image", spec.ID)
	}
	// runsc refuses a root path with a symlink in it (a symlinked state
	// directory, say): hand it the real path.
	if real, err := filepath.EvalSymlinks(spec.Image.Rootfs); err == nil && real != spec.Image.Rootfs {
		img := *spec.Image
		img.Rootfs = real
		spec.Image = &img
	}
	if spec.Network != nil && from != "" {
		return nil, fmt.Errorf("gvisor: sandbox %s: a sandbox with a network is booted, never restored", spec.ID)
	}
	if len(spec.Volumes) > 0 && (from != "" || disk != "") {
		return nil, fmt.Errorf("gvisor: sandbox %s: a sandbox with volumes is booted, never restored or resumed", spec.ID)
	}
	if spec.Limits.MemoryBytes <= 0 || spec.Limits.DiskBytes <= 0 || spec.Limits.Pids <= 0 {
		return nil, fmt.Errorf("gvisor: sandbox %s needs memory, disk and process limits", spec.ID)
	}
	s := &Sandbox{
		b:      b,
		id:     spec.ID,
		dir:    filepath.Join(b.cfg.sandboxesDir(), spec.ID),
		cgroup: b.cgroupPath(spec.ID),
		exited: make(chan struct{}),
		disk:   disk,
	}
	b.mu.Lock()
	if _, dup := b.live[spec.ID]; dup {
		b.mu.Unlock()
		return nil, fmt.Errorf("gvisor: sandbox %s exists", spec.ID)
	}
	b.live[spec.ID] = s
	b.mu.Unlock()
	if err := s.start(ctx, spec, from); err != nil {
		derr := s.Destroy(context.WithoutCancel(ctx))
		return nil, errors.Join(err, derr)
	}
	return s, nil
}

func (b *Backend) forget(id string) {
	b.mu.Lock()
	delete(b.live, id)
	b.mu.Unlock()
}

func (b *Backend) isLive(id string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	_, ok := b.live[id]
	return ok
}

// Reconcile ends every sandbox this backend does not hold (made or
// reattached in this process): containers runsc still knows, cgroups,
// mounts and run directories left by a crash, after the runsc commands a
// crashed process left running are killed. It returns the IDs it ended.
func (b *Backend) Reconcile(ctx context.Context) ([]string, error) {
	b.killStrayCommands()
	ended := map[string]bool{}
	var errs []error
	ids, err := b.listContainers(ctx)
	if err != nil {
		errs = append(errs, err)
	}
	for _, id := range ids {
		if b.isLive(id) {
			continue
		}
		b.runsc(ctx, "kill", "--all", id, "KILL")
		if _, err := b.runsc(ctx, "delete", "--force", id); err != nil {
			errs = append(errs, err)
		}
		ended[id] = true
	}
	if err := (leftovers.Sweep{Cgroups: b.cgroups, CgroupParent: b.cfg.CgroupParent, Dir: b.cfg.sandboxesDir(), Live: b.isLive}).Run(ended); err != nil {
		errs = append(errs, err)
	}
	return leftovers.IDs(ended), errors.Join(errs...)
}
