// Package testenv gives integration tests what they need from the machine
// (root, runsc, built images) and skips with a clear reason where the
// machine lacks it. scripts/test.sh provides all of it, so CI never skips.
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
	"github.com/airlockhq/airlock/gvisor"
	"github.com/airlockhq/airlock/image"
	"github.com/airlockhq/airlock/namespaces"
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

// RequireRoot skips the test unless it runs as root.
func RequireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("skipped: needs root (runsc, cgroups and mounts); run scripts/test.sh as root")
	}
}

// RequireRunsc skips unless runsc is on PATH, and returns its path.
func RequireRunsc(t testing.TB) string {
	t.Helper()
	p, err := exec.LookPath("runsc")
	if err != nil {
		t.Skip("skipped: runsc not installed; scripts/setup.sh installs it")
	}
	return p
}

// Images returns the image store of StateDir, pinned to the agent built
// by scripts/test.sh when AIRLOCK_TEST_AGENT is set.
func Images(t testing.TB) *image.Store {
	t.Helper()
	s, err := image.NewStore(image.StoreConfig{StateDir: StateDir(), AgentPath: os.Getenv("AIRLOCK_TEST_AGENT")})
	if err != nil {
		t.Skipf("skipped: no images in %s (%v); scripts/setup.sh builds them", StateDir(), err)
	}
	return s
}

// Image resolves a built image by name or skips.
func Image(t testing.TB, name string) *airlock.Image {
	t.Helper()
	img, err := Images(t).Resolve(context.Background(), name)
	if err != nil {
		t.Skipf("skipped: image %s not built in %s (%v); scripts/setup.sh builds it", name, StateDir(), err)
	}
	return img
}

// RandomID returns a short random hex ID.
func RandomID() string {
	var b [6]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
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
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := b.Close(); err != nil {
			t.Errorf("close backend: %v", err)
		}
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
	return b
}
