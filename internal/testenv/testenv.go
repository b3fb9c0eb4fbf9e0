// Package testenv gives integration tests what they need from the machine
// (root, runsc, built images, backends) and skips with a clear reason where
// the machine lacks it, through testreq.Skip: with AIRLOCK_TEST_REQUIRE=1
// (scripts/test.sh sets it) a missing requirement fails the test instead.
// scripts/test.sh provides all of it, so CI never skips.
package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/backend/gvisor"
	"github.com/airlockhq/airlock/backend/microvm"
	"github.com/airlockhq/airlock/backend/microvm/qemu"
	"github.com/airlockhq/airlock/backend/namespaces"
	"github.com/airlockhq/airlock/internal/testenv/testreq"
	"github.com/airlockhq/airlock/service/image"
)

// StateDir is where scripts/test.sh built the images.
func StateDir() string {
	if d := os.Getenv("AIRLOCK_TEST_STATE_DIR"); d != "" {
		return d
	}
	if d := os.Getenv("AIRLOCK_STATE_DIR"); d != "" {
		return d
	}
	return "/var/lib/airlock"
}

// RequireRoot skips the test unless it runs as root (see testreq.Skip).
func RequireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		testreq.Skip(t, "skipped: needs root (runsc, cgroups and mounts); run scripts/test.sh as root")
	}
}

// RequireRunsc skips unless runsc is on PATH (see testreq.Skip), and
// returns its path.
func RequireRunsc(t testing.TB) string {
	t.Helper()
	p, err := exec.LookPath("runsc")
	if err != nil {
		testreq.Skip(t, "skipped: runsc not installed; scripts/setup.sh installs it")
	}
	return p
}

// Agent returns the agent binary the images carry, AIRLOCK_TEST_AGENT
// (scripts/test.sh sets it to bin/airlock-agent), or skips (see
// testreq.Skip) when it is unset or missing.
func Agent(t testing.TB) string {
	t.Helper()
	p := os.Getenv("AIRLOCK_TEST_AGENT")
	if p == "" {
		testreq.Skip(t, "skipped: AIRLOCK_TEST_AGENT is not set; scripts/test.sh sets it to the agent the images carry")
	}
	if _, err := os.Stat(p); err != nil {
		testreq.Skipf(t, "skipped: AIRLOCK_TEST_AGENT: %v; scripts/setup.sh builds bin/airlock-agent", err)
	}
	return p
}

// Images returns the image store of StateDir, pinned to the agent built
// by scripts/test.sh when AIRLOCK_TEST_AGENT is set.
func Images(t testing.TB) *image.Store {
	t.Helper()
	s, err := image.NewStore(image.StoreConfig{StateDir: StateDir(), AgentPath: os.Getenv("AIRLOCK_TEST_AGENT")})
	if err != nil {
		testreq.Skipf(t, "skipped: no images in %s (%v); scripts/setup.sh builds them", StateDir(), err)
	}
	return s
}

// Image resolves a built image by name or skips (see testreq.Skip).
func Image(t testing.TB, name string) *airlock.Image {
	t.Helper()
	img, err := Images(t).Resolve(context.Background(), name)
	if err != nil {
		testreq.Skipf(t, "skipped: image %s not built in %s (%v); scripts/setup.sh builds it", name, StateDir(), err)
	}
	return img
}

// RandomID returns a short random hex ID.
func RandomID() string {
	var b [6]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// testBackend is what the end of a test needs of a backend it made.
type testBackend interface {
	Reconcile(ctx context.Context) ([]string, error)
	CheckClean(ctx context.Context) error
	RemoveAll() error
}

// cleanUpAtEnd makes the test's end reconcile away every sandbox b left,
// fail the test if any was left or anything of them remains on the host,
// and remove b's state and its directory dir.
func cleanUpAtEnd(t testing.TB, b testBackend, dir string) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		ids, err := b.Reconcile(ctx)
		if err != nil {
			t.Errorf("reconcile at cleanup: %v", err)
		}
		if len(ids) > 0 {
			t.Errorf("sandboxes left behind at test end: %v", ids)
		}
		if err := b.CheckClean(ctx); err != nil {
			t.Errorf("host not clean after the test: %v", err)
		}
		if err := b.RemoveAll(); err != nil {
			t.Errorf("remove backend state: %v", err)
		}
		os.RemoveAll(dir)
	})
}

// GVisor returns a gVisor backend with its own state directory and cgroup
// parent. When the test ends, every sandbox it left is reconciled away and
// the test fails if anything of them remains on the host.
func GVisor(t testing.TB) *gvisor.Backend {
	t.Helper()
	RequireRoot(t)
	RequireRunsc(t)
	dir, err := os.MkdirTemp("", "airlock-test-")
	if err != nil {
		t.Fatal(err)
	}
	parent := "airlock-test-" + RandomID()
	b, err := gvisor.New(gvisor.Config{
		StateDir:     dir,
		CgroupParent: parent,
		Logger:       slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		t.Fatal(err)
	}
	cleanUpAtEnd(t, b, dir)
	return b
}

// Namespaces returns a namespaces backend with its own state directory,
// cgroup parent and a random block of host uids. When the test ends,
// every sandbox it left is reconciled away and the test fails if anything
// of them remains on the host.
func Namespaces(t testing.TB) *namespaces.Backend {
	t.Helper()
	RequireRoot(t)
	dir, err := os.MkdirTemp("", "airlock-test-ns-")
	if err != nil {
		t.Fatal(err)
	}
	var r [2]byte
	rand.Read(r[:])
	b, err := namespaces.New(namespaces.Config{
		StateDir:     dir,
		CgroupParent: "airlock-test-ns-" + RandomID(),
		// A block of its own, so that tests running at once never share
		// a host uid.
		UIDBase:  namespaces.DefaultUIDBase + (int(r[0])<<8|int(r[1]))%4096*4096,
		UIDCount: 4096,
		Logger:   slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		t.Fatal(err)
	}
	cleanUpAtEnd(t, b, dir)
	// Cleanups run last first: the backend is closed before the sweep.
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Errorf("close backend: %v", err)
		}
	})
	return b
}

// MicroVM returns a microVM backend (QEMU microvm, KVM when the probe
// boot works, else TCG) with its own state directory, cgroup parent and
// a random block of host uids, booting the guest kernel scripts/setup.sh
// unpacked into StateDir()/kernel. The test binary must call
// jailer.RunIfAsked in its TestMain: QEMU's jailer is the test binary
// run again. When the test ends, every sandbox it left is reconciled
// away and the test fails if anything of them remains on the host.
func MicroVM(t testing.TB) *microvm.Backend {
	t.Helper()
	RequireRoot(t)
	if _, err := exec.LookPath("qemu-system-x86_64"); err != nil {
		testreq.Skip(t, "skipped: qemu-system-x86_64 not installed; scripts/setup.sh installs it")
	}
	kdir, err := image.FindKernel(StateDir() + "/kernel")
	if err != nil {
		testreq.Skipf(t, "skipped: %v", err)
	}
	kernel, err := image.KernelImage(kdir)
	if err != nil {
		testreq.Skipf(t, "skipped: %v", err)
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	// The monitor's answers (a restore's migration among them) take as
	// long as a boot on a loaded machine: the same bound as StartTimeout
	// below, not the driver's 30 s.
	drv, err := qemu.New(context.Background(), qemu.Config{ProbeKernel: kernel, Logger: logger, StartTimeout: 3 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "airlock-test-vm-")
	if err != nil {
		t.Fatal(err)
	}
	var r [2]byte
	rand.Read(r[:])
	b, err := microvm.New(microvm.Config{
		StateDir:     dir,
		BuildGuest:   image.GuestBuilder(image.GuestConfig{StateDir: StateDir(), KernelDir: kdir}),
		Driver:       drv,
		CgroupParent: "airlock-test-vm-" + RandomID(),
		UIDBase:      microvm.DefaultUIDBase + (int(r[0])<<8|int(r[1]))%4096*4096,
		UIDCount:     4096,
		// Boots under TCG on a loaded two-core machine take tens of
		// seconds.
		StartTimeout: 3 * time.Minute,
		Logger:       logger,
	})
	if err != nil {
		t.Fatal(err)
	}
	cleanUpAtEnd(t, b, dir)
	return b
}
