package microvm

import (
	"github.com/airlockhq/airlock/internal/guestabi"

	"context"
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

// SandboxUID is the guest user every program runs as.
const SandboxUID = 1000

// Backend runs each sandbox in a microVM.
type Backend struct {
	cfg       Config
	cgroups   cgroups.Manager
	templates *loopdisk.Templates

	mu     sync.Mutex
	live   map[string]*Sandbox
	uids   map[int]string // host uid -> sandbox ID
	issued map[int]bool
	guests map[string]*guestabi.Guest // image hash -> its guest artefacts
}

var _ airlock.Backend = (*Backend)(nil)

// New returns a backend; it creates its directories but starts nothing.
func New(cfg Config) (*Backend, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	// Only root enters: the jailer chroots (as root) straight into a
	// machine's jail, so the VMM's uid never walks these paths.
	if err := os.MkdirAll(cfg.vmsDir(), 0o700); err != nil {
		return nil, fmt.Errorf("microvm: %w", err)
	}
	return &Backend{
		cfg:       cfg,
		cgroups:   cgroups.Detect(),
		templates: &loopdisk.Templates{Dir: cfg.templatesDir()},
		live:      map[string]*Sandbox{},
		uids:      map[int]string{},
		issued:    map[int]bool{},
		guests:    map[string]*guestabi.Guest{},
	}, nil
}

// Name is the backend's name in configs and records.
func (b *Backend) Name() string { return "microvm" }

// Capabilities of the backend: a guest kernel under a hypervisor (or
// QEMU's emulator, which Accelerator says).
func (b *Backend) Capabilities() airlock.Capabilities {
	return airlock.Capabilities{
		HardwareIsolation: true,
		SeparateKernel:    true,
		NetworkModes:      []string{airlock.NetworkNone, airlock.NetworkAllowList},
		RequiresRoot:      true,
		Accelerator:       string(b.cfg.Driver.Accel()),
		// No volumes: a shared ext4 cannot be a second VM's disk, and
		// the guest has no shared file system (docs/volumes.md#backends).
		Volumes: false,
	}
}

// Accelerator is "kvm" or "tcg".
func (b *Backend) Accelerator() string { return string(b.cfg.Driver.Accel()) }

var validID = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_-]{0,63}$`)

func (b *Backend) cgroupPath(id string) string { return filepath.Join(b.cfg.CgroupParent, id) }

// guest returns img's guest artefacts, building them the first time.
func (b *Backend) guest(ctx context.Context, img *airlock.Image) (*guestabi.Guest, error) {
	b.mu.Lock()
	g := b.guests[img.Hash]
	b.mu.Unlock()
	if g != nil {
		return g, nil
	}
	g, err := b.cfg.BuildGuest(ctx, img)
	if err != nil {
		return nil, fmt.Errorf("microvm: guest of image %s: %w", img.Name, err)
	}
	b.mu.Lock()
	b.guests[img.Hash] = g
	b.mu.Unlock()
	return g, nil
}

// allocUID hands out the lowest free host uid of the range.
func (b *Backend) allocUID(id string) (int, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for i := 0; i < b.cfg.UIDCount; i++ {
		uid := b.cfg.UIDBase + i
		if _, used := b.uids[uid]; !used {
			b.uids[uid] = id
			b.issued[uid] = true
			return uid, true
		}
	}
	return 0, false
}

func (b *Backend) forget(s *Sandbox) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.live[s.id] == s {
		delete(b.live, s.id)
	}
	if b.uids[s.uid] == s.id {
		delete(b.uids, s.uid)
	}
}

func (b *Backend) isLive(id string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	_, ok := b.live[id]
	return ok
}

// Reconcile ends every sandbox this backend did not create in this
// process: the VMMs left in its cgroups (killed with their cgroups),
// machine directories with their disks and any mount below them. It
// returns the IDs it ended.
func (b *Backend) Reconcile(ctx context.Context) ([]string, error) {
	ended := map[string]bool{}
	err := leftovers.Sweep{Cgroups: b.cgroups, CgroupParent: b.cfg.CgroupParent, Dir: b.cfg.vmsDir(), Live: b.isLive}.Run(ended)
	return leftovers.IDs(ended), err
}
