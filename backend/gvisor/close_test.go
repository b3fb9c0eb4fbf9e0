package gvisor_test

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/backend/gvisor"
	"github.com/airlockhq/airlock/internal/mountinfo"
	"github.com/airlockhq/airlock/internal/testenv"
)

// TestCloseReleasesRunscMounts: runsc pins its empty network namespace
// with a bind mount in the backend's runsc root and never removes it, so
// a daemon that stops cleanly must, or its state directory cannot be
// removed (EBUSY) and the host keeps a mount per state directory.
func TestCloseReleasesRunscMounts(t *testing.T) {
	testenv.RequireRoot(t)
	testenv.RequireRunsc(t)
	dir, err := os.MkdirTemp("", "airlock-test-close-")
	if err != nil {
		t.Fatal(err)
	}
	b, err := gvisor.New(gvisor.Config{
		StateDir:     dir,
		CgroupParent: "airlock-test-" + testenv.RandomID(),
		Logger:       slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if ids, err := b.Reconcile(ctx); err != nil || len(ids) > 0 {
			t.Errorf("reconcile at cleanup: %v %v", ids, err)
		}
		if err := b.RemoveAll(); err != nil {
			t.Errorf("remove backend state: %v", err)
		}
		os.RemoveAll(dir)
	})

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sb, err := b.Create(ctx, airlock.SandboxSpec{ID: "t-" + testenv.RandomID(), Image: testenv.Image(t, "base"), Limits: airlock.DefaultLimits})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	if err := sb.Destroy(ctx); err != nil {
		t.Fatalf("destroy: %v", err)
	}
	root := filepath.Join(dir, "runsc")
	if got := mountsUnder(t, root); len(got) == 0 {
		t.Fatalf("runsc left no mount under %s after a sandbox: this test no longer tests anything; see Close", root)
	}
	if err := b.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	if got := mountsUnder(t, root); len(got) > 0 {
		t.Errorf("mounts left under %s after Close: %v", root, got)
	}
}

func mountsUnder(t *testing.T, dir string) []string {
	t.Helper()
	ms, err := mountinfo.Self()
	if err != nil {
		t.Fatal(err)
	}
	return mountinfo.Under(ms, dir)
}
