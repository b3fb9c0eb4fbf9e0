package release_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/airlockhq/airlock/internal/testenv/testreq"
)

// TestImageInPodman loads the release's OCI archive into podman (from
// Debian; scripts/setup.sh --tests installs it) and runs it: its own
// `airlock image build` makes the images in a volume (from the machine's
// debootstrap stages, seeded as hard links, with no network), then the
// image's entrypoint, airlockd, serves /readyz and runs print(1) through
// the REST API on a published loopback port.
//
// What podman needs to run it (see docs/deployment.md): --privileged
// (runsc makes namespaces, mounts and cgroups, and mounts /proc and
// /sys of its own), the state directory as a volume. On these machines
// also: the runc runtime where cgroups are v1 with a v2 hierarchy beside
// them (crun refuses "hybrid" cgroups), and --ulimit values no higher
// than the host's (podman asks for more than the hard limits, which
// fails without CAP_SYS_RESOURCE).
func TestImageInPodman(t *testing.T) {
	podman, err := exec.LookPath("podman")
	if err != nil {
		testreq.Skip(t, "skipped: podman is not installed (scripts/setup.sh --tests installs it from Debian)")
	}
	rel := testRelease(t)
	args := podmanArgs(t)

	name := testRepo + ":" + rel.version
	out, err := exec.Command(podman, append(args, "load", "-i", rel.archive)...).CombinedOutput()
	if err != nil {
		t.Fatalf("podman load: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		// Removing the image's layers took minutes on a machine at load 50.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		if out, err := exec.CommandContext(ctx, podman, append(args, "rmi", "-f", name)...).CombinedOutput(); err != nil {
			t.Errorf("podman rmi %s: %v\n%s", name, err, out)
		}
	})
	if !strings.Contains(string(out), name) {
		t.Errorf("podman load named the image otherwise than %s:\n%s", name, out)
	}
	img, digest := loadArchive(t, rel)
	cfgDigest, err := img.ConfigName()
	if err != nil {
		t.Fatal(err)
	}
	id, err := exec.Command(podman, append(args, "image", "inspect", "--format", "{{.Id}} {{.Digest}}", name)...).Output()
	if err != nil {
		t.Fatalf("podman image inspect %s: %v", name, err)
	}
	if f := strings.Fields(string(id)); len(f) != 2 || f[0] != cfgDigest.Hex || f[1] != digest.String() {
		t.Errorf("podman holds %s as %q, want ID %s and digest %s", name, id, cfgDigest.Hex, digest)
	}

	state := t.TempDir()
	t.Cleanup(func() { unmountUnder(t, state) })
	seedStages(t, state)
	run := append(args, "run", "--privileged")
	run = append(run, ulimits()...)
	run = append(run, "-v", state+":/var/lib/airlock")

	// The images, by the image's own airlock and agent, without a network.
	build := append(append([]string{}, run...), "--rm", "--network", "none", "--entrypoint", "/usr/local/bin/airlock", name,
		"image", "build", "--state-dir", "/var/lib/airlock", "--agent", "/usr/local/bin/airlock-agent", "all")
	start := time.Now()
	if out, err := exec.Command(podman, build...).CombinedOutput(); err != nil {
		t.Fatalf("airlock image build in the container: %v\n%s", err, out)
	}
	t.Logf("images built in the container in %v", time.Since(start).Round(time.Second))

	addr := freeAddr(t)
	ctr := "airlock-release-test-" + randomHex(4)
	// A cgroup parent of its own: with cgroups v1 a privileged container
	// sees the host's hierarchy, and the reconciler owns all of its
	// parent, whose default is a real node's.
	serve := append(append([]string{}, run...), "-d", "--name", ctr, "-p", addr+":8080", name,
		"--cgroup-parent", "airlock-release-test-"+randomHex(6))
	if out, err := exec.Command(podman, serve...).CombinedOutput(); err != nil {
		t.Fatalf("podman run: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		if t.Failed() {
			logs, _ := exec.Command(podman, append(args, "logs", ctr)...).CombinedOutput()
			t.Logf("airlockd's log in the container:\n%s", logs)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		if out, err := exec.CommandContext(ctx, podman, append(args, "rm", "-f", "-t", "30", ctr)...).CombinedOutput(); err != nil {
			t.Errorf("podman rm: %v\n%s", err, out)
		}
	})
	start = time.Now()
	base := "http://" + addr
	if !testreq.Poll(3*time.Minute, func() bool {
		r, err := http.Get(base + "/readyz")
		if err != nil {
			return false
		}
		r.Body.Close()
		return r.StatusCode == http.StatusOK
	}) {
		t.Fatal("airlockd in podman did not become ready within 3 minutes")
	}
	t.Logf("ready %v after podman run", time.Since(start).Round(time.Millisecond))
	key, err := os.ReadFile(filepath.Join(state, "default.key"))
	if err != nil {
		t.Fatal(err)
	}
	res := execute(t, base, strings.TrimSpace(string(key)), `print(1)`)
	if res.ExitCode != 0 || res.Stdout != "1\n" {
		t.Fatalf("print(1) through airlockd in podman: %+v", res)
	}
	t.Logf("print(1) ran in a gVisor sandbox of airlockd in podman")
}

// podmanArgs are podman's global flags for this host: the runc runtime
// where cgroups are hybrid (v1 controllers with a v2 hierarchy mounted
// beside them), which crun refuses.
func podmanArgs(t *testing.T) []string {
	t.Helper()
	if _, err := os.Stat("/sys/fs/cgroup/unified/cgroup.controllers"); err != nil {
		return nil
	}
	runc, err := exec.LookPath("runc")
	if err != nil {
		testreq.Skip(t, "skipped: cgroups are hybrid here, which crun refuses, and runc is not installed (scripts/setup.sh --tests installs it)")
	}
	return []string{"--runtime", runc}
}

// ulimits are the container's open-file and process limits: at most
// the host's hard limits, at most 65536 files and 16384 processes.
// Podman's defaults for root (2^20 files, 2^22 processes) exceed the
// hard limits of hosts like these development machines, where raising
// a hard limit fails without CAP_SYS_RESOURCE (there the host's own hard
// process limit failed too, and 16384 worked: podman's conmon ran with
// 32768).
func ulimits() []string {
	lim := func(res int, most uint64) string {
		var r unix.Rlimit
		n := most
		if err := unix.Getrlimit(res, &r); err == nil && r.Max < n {
			n = r.Max
		}
		return fmt.Sprintf("%d:%d", n, n)
	}
	return []string{"--ulimit", "nofile=" + lim(unix.RLIMIT_NOFILE, 65536), "--ulimit", "nproc=" + lim(unix.RLIMIT_NPROC, 16384)}
}
