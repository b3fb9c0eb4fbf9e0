//go:build linux

package image_test

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlockhq/airlock/internal/testenv"
	"github.com/airlockhq/airlock/internal/testenv/testreq"
	"github.com/airlockhq/airlock/service/image"
)

// TestDerivedStageReal derives a stage the real way (apt-get in a chroot
// of a copy of base's stage, from Debian's mirror) into a temporary state
// directory, and checks the extra package is installed and works, base's
// stage is unchanged, and nothing stays mounted. The spec is base plus
// one small package (jq), built the way python-ds's stage is: the same
// code, without minutes of numpy and matplotlib downloads in every test
// run (python-ds itself is derived by scripts/setup.sh, and the e2e tests
// plot with it). Base's stage is not debootstrapped: the machine's own
// (scripts/setup.sh built it into the state directory) is hard-linked in,
// which is also why base's stage must come out of the build exactly as
// it went in.
func TestDerivedStageReal(t *testing.T) {
	state := seedBaseStage(t)
	base := spec(t, "base")
	ds := base
	ds.Name, ds.From = "derive-test", "base"
	ds.Packages = append(slices.Clone(base.Packages), "jq")
	baseHash := image.StageHash(base)
	stages := filepath.Join(state, "images", "stages")
	baseRootfs := filepath.Join(stages, baseHash, "rootfs")
	before := treeListing(t, baseRootfs)

	agent := filepath.Join(t.TempDir(), "agent")
	writeELF(t, agent, "derived-stage test agent", false)
	b, err := image.NewBuilder(image.Config{
		StateDir:  state,
		AgentPath: agent,
		Mirror:    os.Getenv("AIRLOCK_TEST_MIRROR"),
		Progress:  testWriter{t},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	img, err := b.Build(ctx, ds)
	if err != nil {
		t.Fatal(err)
	}
	var info struct {
		Parent        string  `json:"parent"`
		DeriveSeconds float64 `json:"derive_seconds"`
	}
	data, err := os.ReadFile(filepath.Join(stages, image.StageHash(ds), "stage.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &info); err != nil {
		t.Fatal(err)
	}
	t.Logf("derive-test: %s; stage derived in %.1fs", image.HumanSize(img.SizeBytes), info.DeriveSeconds)
	if info.Parent != baseHash {
		t.Errorf("stage.json parent = %q, want base's %s", info.Parent, baseHash)
	}

	if d := diffListings(before, treeListing(t, baseRootfs)); len(d) > 0 {
		if len(d) > 20 {
			d = append(d[:20], "...")
		}
		t.Errorf("base's stage changed while a stage was derived from it:\n%s", strings.Join(d, "\n"))
	}
	if mps, err := mountinfoUnder(state); err != nil || len(mps) > 0 {
		t.Errorf("mounts left under the state dir: %v %v", mps, err)
	}
	if img.SizeBytes <= 0 {
		t.Errorf("SizeBytes = %d", img.SizeBytes)
	}
	if _, err := os.Lstat(filepath.Join(img.Rootfs, "usr/sbin/policy-rc.d")); !os.IsNotExist(err) {
		t.Errorf("policy-rc.d left in the image: %v", err)
	}
	if got := entries(t, filepath.Join(img.Rootfs, "var/lib/apt/lists")); len(got) != 0 {
		t.Errorf("apt lists left: %q", got)
	}

	// The packages, and what they are for, in a chroot with a scratch
	// /tmp of its own mount namespace.
	chroot := func(argv ...string) string {
		t.Helper()
		cmd := exec.CommandContext(ctx, "unshare", append([]string{"--mount", "--propagation", "private", "sh", "-ec",
			`mount -t tmpfs -o mode=1777 tmpfs "$1/tmp"; r=$1; shift; exec chroot "$r" "$@"`, "sh", img.Rootfs}, argv...)...)
		cmd.Env = append(img.Env, "HOME=/tmp")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Errorf("%q: %v\n%s", argv, err, out)
		}
		return string(out)
	}
	for _, p := range []string{"jq", "python3", "nodejs", "tzdata"} {
		if got := chroot("dpkg-query", "-W", "-f", "${Status}", p); got != "install ok installed" {
			t.Errorf("%s: %q", p, got)
		}
	}
	if got := chroot("sh", "-c", `echo '{"a": [1, 2]}' | jq -c .a`); got != "[1,2]\n" {
		t.Errorf("jq in the derived stage printed %q, want [1,2]", got)
	}
	chroot("python3", "-c", "import json, sqlite3, zoneinfo; zoneinfo.ZoneInfo('Europe/Paris')")
	chroot("node", "-e", "console.log(1)")
	if mps, err := mountinfoUnder(state); err != nil || len(mps) > 0 {
		t.Errorf("mounts left under the state dir: %v %v", mps, err)
	}
}

// seedBaseStage returns a new state directory holding the machine's stage
// of base (hard links into testenv.StateDir, which scripts/setup.sh
// filled), after checking what deriving a stage needs.
func seedBaseStage(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		testreq.Skip(t, "skipped: deriving a stage needs root (chroot, namespaces, mounts)")
	}
	for _, tool := range []string{"chroot", "unshare", "cp"} {
		if _, err := exec.LookPath(tool); err != nil {
			testreq.Skipf(t, "skipped: %s not found", tool)
		}
	}
	baseHash := image.StageHash(spec(t, "base"))
	src := filepath.Join(testenv.StateDir(), "images", "stages", baseHash)
	if _, err := os.Stat(filepath.Join(src, "stage.json")); err != nil {
		testreq.Skipf(t, "skipped: base's stage %s is not in %s (scripts/setup.sh builds it): %v", image.Short(baseHash), testenv.StateDir(), err)
	}
	state := t.TempDir()
	stages := filepath.Join(state, "images", "stages")
	if err := os.MkdirAll(stages, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("cp", "-al", src, stages).CombinedOutput(); err != nil {
		// Another filesystem: a real copy does as well, only slower.
		t.Logf("cp -al: %v: %s; copying", err, out)
		os.RemoveAll(filepath.Join(stages, baseHash))
		if out, err := exec.Command("cp", "-a", src, stages).CombinedOutput(); err != nil {
			t.Fatalf("cp -a %s: %v\n%s", src, err, out)
		}
	}
	return state
}

// TestDerivedStageRealCancel cancels a real derived build while apt-get
// fetches: the build ends with the context's error, and leaves no mount,
// no process in a chroot of the state directory and no temporary tree.
func TestDerivedStageRealCancel(t *testing.T) {
	state := seedBaseStage(t)
	agent := filepath.Join(t.TempDir(), "agent")
	writeELF(t, agent, "derived-stage test agent", false)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	// Cancel at apt-get's first fetch: apt-get and its download methods
	// are running in the chroot then.
	w := &cancelOn{w: testWriter{t}, marker: "  apt| Get:", cancel: cancel}
	b, err := image.NewBuilder(image.Config{StateDir: state, AgentPath: agent, Mirror: os.Getenv("AIRLOCK_TEST_MIRROR"), Progress: w})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = b.Build(ctx, spec(t, "python-ds"))
	if err == nil || !w.seen() {
		t.Fatalf("Build = %v (cancelled: %v), want the cancellation", err, w.seen())
	}
	t.Logf("Build = %v after %s", err, time.Since(start).Round(time.Millisecond))
	if mps, err := mountinfoUnder(state); err != nil || len(mps) > 0 {
		t.Errorf("mounts left under the state dir: %v %v", mps, err)
	}
	if ps := chrootedUnder(t, state); len(ps) > 0 {
		t.Errorf("processes left in a chroot under the state dir: %v", ps)
	}
	if got := entries(t, filepath.Join(state, "images", ".tmp")); len(got) > 0 {
		t.Errorf("temp dirs left: %q", got)
	}
	if got := entries(t, filepath.Join(state, "images", "stages")); len(got) != 1 {
		t.Errorf("stages = %q, want base's only", got)
	}
}

// cancelOn passes writes to w and calls cancel once marker was written.
type cancelOn struct {
	w      io.Writer
	marker string
	cancel func()
	mu     sync.Mutex
	buf    strings.Builder
	done   bool
}

func (c *cancelOn) Write(p []byte) (int, error) {
	c.mu.Lock()
	if !c.done {
		c.buf.Write(p)
		if strings.Contains(c.buf.String(), c.marker) {
			c.done = true
			c.cancel()
		}
	}
	c.mu.Unlock()
	return c.w.Write(p)
}

func (c *cancelOn) seen() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.done
}

// chrootedUnder lists the processes whose root directory is dir or below.
func chrootedUnder(t *testing.T, dir string) []string {
	t.Helper()
	procs, err := filepath.Glob("/proc/[0-9]*/root")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range procs {
		root, err := os.Readlink(p)
		if err == nil && (root == dir || strings.HasPrefix(root, dir+"/")) {
			out = append(out, p+" -> "+root)
		}
	}
	return out
}
