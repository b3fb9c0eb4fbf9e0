package namespaces

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/backend/namespaces/nsinit"
	"github.com/airlockhq/airlock/internal/cgroups"
	"github.com/airlockhq/airlock/internal/leftovers"
	"github.com/airlockhq/airlock/internal/loopdisk"
)

// SandboxUID is the user (and group) every sandbox process runs as,
// inside the sandbox. It is mapped to a host uid of its own per sandbox.
const SandboxUID = 1000

// Backend runs sandboxes in Linux namespaces on the host kernel.
type Backend struct {
	cfg     Config
	cgroups cgroups.Manager
	disks   *disks
	ready   *prestarter

	mu     sync.Mutex
	live   map[string]*Sandbox
	uids   map[int]string // host uid -> sandbox ID, for live sandboxes
	issued map[int]bool   // every host uid handed out, for CheckClean
}

var _ airlock.Backend = (*Backend)(nil)

// New returns a backend. It creates its directories but starts nothing.
func New(cfg Config) (*Backend, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.sandboxesDir(), 0o700); err != nil {
		return nil, fmt.Errorf("namespaces: %w", err)
	}
	if err := makeShared(cfg.StateDir); err != nil {
		return nil, err
	}
	b := &Backend{
		cfg:     cfg,
		cgroups: cgroups.Detect(),
		disks:   newDisks(&loopdisk.Templates{Dir: cfg.templatesDir()}, cfg.disksDir(), cfg.ReadyDisks),
		live:    map[string]*Sandbox{},
		uids:    map[int]string{},
		issued:  map[int]bool{},
	}
	b.ready = newPrestarter(b, cfg.Prestart)
	return b, nil
}

// Close stops keeping sandboxes and disks ready and ends those it kept.
// Sandboxes still live are not touched; Create may still be called (it
// then starts each sandbox and makes each disk itself).
func (b *Backend) Close() error { return errors.Join(b.ready.close(), b.disks.close()) }

// KeptPIDs are the host processes of sandboxes started ahead of time and
// not yet given to anyone (see conformance.Keeper).
func (b *Backend) KeptPIDs() []int { return b.ready.pids() }

// Name is the backend's name in configs and records.
func (b *Backend) Name() string { return "namespaces" }

// Capabilities of the backend: the host's kernel is shared.
func (b *Backend) Capabilities() airlock.Capabilities {
	return airlock.Capabilities{
		HardwareIsolation: false,
		NetworkModes:      []string{"none"},
		RequiresRoot:      true,
		SeparateKernel:    false,
		Volumes:           true, // idmapped mounts of the node's (volumes.go)
	}
}

// LandlockABI is the Landlock ABI version sandboxes get on this kernel,
// 0 when it offers none.
func (b *Backend) LandlockABI() int { return nsinit.LandlockABI() }

var validID = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_-]{0,63}$`)

func (b *Backend) cgroupPath(id string) string { return filepath.Join(b.cfg.CgroupParent, id) }

// Create makes and starts a sandbox and waits for its agent's hello.
func (b *Backend) Create(ctx context.Context, spec airlock.SandboxSpec) (airlock.Sandbox, error) {
	if !validID.MatchString(spec.ID) {
		return nil, fmt.Errorf("namespaces: invalid sandbox id %q", spec.ID)
	}
	if spec.Image == nil || spec.Image.Rootfs == "" {
		return nil, fmt.Errorf("namespaces: sandbox %s has no image", spec.ID)
	}
	if spec.Limits.MemoryBytes <= 0 || spec.Limits.DiskBytes <= 0 || spec.Limits.Pids <= 0 {
		return nil, fmt.Errorf("namespaces: sandbox %s needs memory, disk and process limits", spec.ID)
	}
	b.mu.Lock()
	_, dup := b.live[spec.ID]
	b.mu.Unlock()
	if dup {
		return nil, fmt.Errorf("namespaces: sandbox %s exists", spec.ID)
	}
	// A sandbox started ahead of time for this image, else one now.
	s := b.ready.take(spec.Image.Rootfs)
	if s == nil {
		var err error
		if s, err = b.spawnNew(spec.Image.Rootfs); err != nil {
			return nil, err
		}
	}
	b.mu.Lock()
	if _, dup := b.live[spec.ID]; dup {
		b.mu.Unlock()
		s.Destroy(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("namespaces: sandbox %s exists", spec.ID)
	}
	if b.uids[s.uid] == s.id {
		b.uids[s.uid] = spec.ID
	}
	s.id = spec.ID
	s.dir = filepath.Join(b.cfg.sandboxesDir(), spec.ID)
	b.live[spec.ID] = s
	b.mu.Unlock()
	if err := s.configure(ctx, spec); err != nil {
		derr := s.Destroy(context.WithoutCancel(ctx))
		return nil, errors.Join(err, derr)
	}
	return s, nil
}

// spawnNew starts the init stage of a sandbox that has no ID yet, under a
// host uid of its own and a name of its own ("pre-..."), with its log in
// the directory of ready sandboxes.
func (b *Backend) spawnNew(rootfs string) (*Sandbox, error) {
	key := "pre-" + randomHex(8)
	b.mu.Lock()
	uid, ok := b.allocUID(key)
	b.mu.Unlock()
	if !ok {
		return nil, airlock.Problem(airlock.EUNAVAILABLE, "node-busy", "no free sandbox user on this node")
	}
	if err := os.MkdirAll(b.cfg.readyDir(), 0o700); err != nil {
		b.freeUID(uid, key)
		return nil, fmt.Errorf("namespaces: %w", err)
	}
	s, err := b.spawn(rootfs, uid, filepath.Join(b.cfg.readyDir(), key+".log"))
	if err != nil {
		b.freeUID(uid, key)
		return nil, err
	}
	s.id = key
	return s, nil
}

func (b *Backend) freeUID(uid int, key string) {
	b.mu.Lock()
	if b.uids[uid] == key {
		delete(b.uids, uid)
	}
	b.mu.Unlock()
}

func randomHex(n int) string {
	buf := make([]byte, n)
	rand.Read(buf)
	return hex.EncodeToString(buf)
}

// allocUID hands out the lowest free host uid of the range; b.mu is held.
func (b *Backend) allocUID(id string) (int, bool) {
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

// forget drops a destroyed sandbox and frees its uid.
func (b *Backend) forget(s *Sandbox) {
	b.mu.Lock()
	delete(b.live, s.id)
	if b.uids[s.uid] == s.id {
		delete(b.uids, s.uid)
	}
	b.mu.Unlock()
}

func (b *Backend) isLive(id string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	_, ok := b.live[id]
	return ok
}

// Reconcile ends every sandbox this backend did not create in this
// process: cgroups (and every process in them), mounts and run
// directories left by a crash. It returns the IDs it ended. A sandbox's
// processes cannot leave its cgroup (its cgroup namespace hides every
// other), so killing the cgroup ends all of them, and with them its
// namespaces.
func (b *Backend) Reconcile(ctx context.Context) ([]string, error) {
	ended := map[string]bool{}
	errs := []error{leftovers.Sweep{Cgroups: b.cgroups, CgroupParent: b.cfg.CgroupParent, Dir: b.cfg.sandboxesDir(), Live: b.isLive}.Run(ended)}
	if err := b.disks.reconcile(); err != nil {
		errs = append(errs, err)
	}
	if err := b.ready.reconcile(); err != nil {
		errs = append(errs, err)
	}
	return leftovers.IDs(ended), errors.Join(errs...)
}

// makeShared makes dir a mount point with shared propagation (a bind
// mount of itself, once). A sandbox's init stage copies the host's mounts
// when it starts, possibly long before its disk is mounted (a sandbox
// kept ready); mounts made later below dir reach its copy as well, until
// it makes its mounts private to build its root.
func makeShared(dir string) error {
	mounts, err := loopdisk.MountsUnder(dir)
	if err != nil {
		return fmt.Errorf("namespaces: %w", err)
	}
	if !slices.Contains(mounts, dir) {
		if err := unix.Mount(dir, dir, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("namespaces: bind %s: %w", dir, err)
		}
	}
	if err := unix.Mount("", dir, "", unix.MS_SHARED, ""); err != nil {
		return fmt.Errorf("namespaces: make %s shared: %w", dir, err)
	}
	return nil
}
