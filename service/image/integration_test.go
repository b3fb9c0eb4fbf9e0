//go:build linux

package image_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/airlockhq/airlock/internal/testenv/testreq"
	"github.com/airlockhq/airlock/service/image"
)

// requireDebootstrap skips unless the real-debootstrap tests were asked
// for and can run.
func requireDebootstrap(t *testing.T) {
	t.Helper()
	if os.Getenv("AIRLOCK_TEST_DEBOOTSTRAP") != "1" {
		// Opt-in, not a missing feature: scripts/setup.sh builds the
		// images with this builder (bin/airlock image build) before the
		// suite runs.
		testreq.NotApplicable(t, "opt-in: a real debootstrap build (minutes, network); set AIRLOCK_TEST_DEBOOTSTRAP=1 to run")
	}
	if os.Geteuid() != 0 {
		testreq.Skip(t, "skipped: a real debootstrap build needs root")
	}
	if _, err := exec.LookPath("chroot"); err != nil {
		testreq.Skip(t, "skipped: chroot not found")
	}
	if _, err := os.Stat("/usr/sbin/debootstrap"); err != nil {
		if _, err := exec.LookPath("debootstrap"); err != nil {
			testreq.Skip(t, "skipped: debootstrap not installed; scripts/setup.sh installs it")
		}
	}
}

// TestDebootstrapBuild builds the images named in
// $AIRLOCK_TEST_DEBOOTSTRAP_IMAGES (comma-separated, default "base") with
// the real debootstrap and the host's mirror (or $AIRLOCK_TEST_MIRROR)
// into $AIRLOCK_TEST_STATE_DIR (default a temporary directory), and runs
// the image's programs in a chroot.
func TestDebootstrapBuild(t *testing.T) {
	requireDebootstrap(t)
	state := os.Getenv("AIRLOCK_TEST_STATE_DIR")
	if state == "" {
		state = t.TempDir()
	}
	agent := filepath.Join(t.TempDir(), "agent")
	writeELF(t, agent, "integration-test agent", false)
	b, err := image.NewBuilder(image.Config{
		StateDir:  state,
		AgentPath: agent,
		Mirror:    os.Getenv("AIRLOCK_TEST_MIRROR"),
		Progress:  testWriter{t},
	})
	if err != nil {
		t.Fatal(err)
	}
	names := strings.Split(os.Getenv("AIRLOCK_TEST_DEBOOTSTRAP_IMAGES"), ",")
	if names[0] == "" {
		names = []string{"base"}
	}
	checks := map[string][][]string{
		"base": {
			{"python3", "-c", "import ssl, sqlite3, zoneinfo; print(zoneinfo.ZoneInfo('Europe/Paris'))"},
			{"node", "-e", "console.log(1)"},
			{"sqlite3", ":memory:", "select 1"},
			{"id", "sandbox"},
		},
		"python-ds": {
			{"python3", "-c", "import numpy, pandas, matplotlib; import matplotlib.pyplot as plt; " +
				"plt.plot([1, 2]); plt.title('text'); plt.savefig('/tmp/x.png'); " +
				"assert matplotlib.get_backend().lower() == 'agg', matplotlib.get_backend()"},
		},
	}
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
			defer cancel()
			img, err := b.Build(ctx, spec(t, name))
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: %s, %s", name, image.HumanSize(img.SizeBytes), img.Rootfs)
			// A scratch /tmp, as a sandbox has: nothing the checks write
			// may end up in the image.
			tmp := filepath.Join(img.Rootfs, "tmp")
			if err := syscall.Mount("tmpfs", tmp, "tmpfs", 0, "mode=1777"); err != nil {
				t.Fatal(err)
			}
			defer syscall.Unmount(tmp, syscall.MNT_DETACH)
			for _, argv := range checks[name] {
				cmd := exec.CommandContext(ctx, "chroot", append([]string{img.Rootfs}, argv...)...)
				cmd.Env = append(img.Env, "HOME=/tmp")
				if out, err := cmd.CombinedOutput(); err != nil {
					t.Errorf("%q: %v\n%s", argv, err, out)
				}
			}
		})
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(b), "\n"))
	return len(b), nil
}
