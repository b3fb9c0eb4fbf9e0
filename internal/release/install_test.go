package release_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/airlockhq/airlock/internal/cgroups"
	"github.com/airlockhq/airlock/internal/mountinfo"
	"github.com/airlockhq/airlock/internal/testenv/testreq"
)

// noGoPath is the PATH install.sh and the installed airlockd run with:
// the system's directories only, none of which may hold a go.
const noGoPath = "/usr/sbin:/usr/bin:/sbin:/bin"

// TestInstallTarball installs the release tarball the way an operator
// does, on this machine, into a temporary prefix: install.sh with no Go
// on PATH and no network at all (a network namespace of its own holding
// only a loopback), then DIR/bin/airlockd --state-dir on a free loopback
// port runs print(1) through the REST API, and stops.
//
// install.sh builds the images (base and python-ds: --images all) with the release's own
// airlock and agent, into the temporary state directory. It is handed
// the debootstrap stages of the machine's images (testenv.StateDir, as
// hard links), so no debootstrap runs and nothing is fetched: the build
// takes the release's agent into images of its own, as a real install
// does after its debootstrap.
func TestInstallTarball(t *testing.T) {
	rel := testRelease(t)
	for _, dir := range filepath.SplitList(noGoPath) {
		if _, err := os.Stat(filepath.Join(dir, "go")); err == nil {
			t.Fatalf("%s/go exists: the install cannot be shown to need no Go", dir)
		}
	}

	// The folder holds what install.sh installs.
	for _, f := range []string{"install.sh", "bin/airlockd", "bin/airlock", "bin/airlock-agent", "bin/runsc",
		"systemd/airlockd.service", "doc/README.md", "kubernetes/airlockd.yaml", "IMAGE", "VERSION"} {
		if _, err := os.Stat(filepath.Join(rel.tree, f)); err != nil {
			t.Errorf("the tarball lacks %s: %v", f, err)
		}
	}

	dir := t.TempDir()
	t.Cleanup(func() { unmountUnder(t, dir) })
	prefix, state := filepath.Join(dir, "prefix"), filepath.Join(dir, "state")
	seedStages(t, state)
	// --no-apt: a Debian package missing here fails the install instead of
	// being fetched (the network namespace has no route anyway).
	// --images all: both images now (the default is base alone), so the
	// airlockd below finds nothing to build in the background.
	cmd := exec.Command("sh", filepath.Join(rel.tree, "install.sh"), "--prefix", prefix, "--state-dir", state, "--no-apt", "--images", "all")
	cmd.Env = []string{"PATH=" + noGoPath, "HOME=" + dir, "LANG=C.UTF-8"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNET}
	start := time.Now()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("install.sh: %v\n%s", err, out)
	}
	t.Logf("install.sh (images included) took %v", time.Since(start).Round(time.Second))
	if !bytes.Contains(out, []byte("airlockd "+rel.version+" ")) {
		t.Errorf("install.sh did not show airlockd %s --version:\n%s", rel.version, out)
	}

	for _, b := range []string{"airlockd", "airlock", "airlock-agent", "runsc"} {
		fi, err := os.Stat(filepath.Join(prefix, "bin", b))
		if err != nil || fi.Mode()&0o111 == 0 {
			t.Errorf("%s/bin/%s: %v, mode %v", prefix, b, err, fi)
		}
	}
	if v, err := exec.Command(filepath.Join(prefix, "bin", "airlock"), "--version").CombinedOutput(); err != nil || !strings.Contains(string(v), rel.version) {
		t.Errorf("airlock --version: %q, %v; want %s", v, err, rel.version)
	}
	if v, err := exec.Command(filepath.Join(prefix, "bin", "runsc"), "--version").CombinedOutput(); err != nil {
		t.Errorf("runsc --version: %v\n%s", err, v)
	}
	checkUnits(t, prefix)

	// airlockd from the prefix, on the embedded defaults, runsc found on
	// PATH in the prefix.
	addr := freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var logs syncBuffer
	// A cgroup parent of its own: the reconciler owns all of its parent,
	// and the default one is a real node's on this host. A node keeps
	// its parent; the test removes it once airlockd has stopped.
	parent := "airlock-release-test-" + randomHex(6)
	t.Cleanup(func() {
		if err := cgroups.Detect().Remove(parent); err != nil {
			t.Errorf("remove cgroup parent %s: %v", parent, err)
		}
	})
	d := exec.CommandContext(ctx, filepath.Join(prefix, "bin", "airlockd"), "--state-dir", state, "--listen", addr,
		"--cgroup-parent", parent)
	d.Env = []string{"PATH=" + filepath.Join(prefix, "bin") + ":" + noGoPath, "HOME=" + dir}
	d.Stdout, d.Stderr = &logs, &logs
	d.Cancel = func() error { return d.Process.Signal(syscall.SIGTERM) }
	d.WaitDelay = time.Minute
	if err := d.Start(); err != nil {
		t.Fatal(err)
	}
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		d.Process.Signal(syscall.SIGTERM)
		if err := d.Wait(); err != nil {
			t.Errorf("airlockd ended with %v after SIGTERM", err)
		}
	}
	defer stop()
	defer func() {
		if t.Failed() {
			t.Logf("airlockd's log:\n%s", logs.String())
		}
	}()

	base := "http://" + addr
	if !testreq.Poll(3*time.Minute, func() bool {
		r, err := http.Get(base + "/readyz")
		if err != nil {
			return false
		}
		r.Body.Close()
		return r.StatusCode == http.StatusOK
	}) {
		t.Fatal("the installed airlockd did not become ready within 3 minutes")
	}
	key, err := os.ReadFile(filepath.Join(state, "default.key"))
	if err != nil {
		t.Fatal(err)
	}
	res := execute(t, base, strings.TrimSpace(string(key)), `print(1)`)
	if res.ExitCode != 0 || res.Stdout != "1\n" {
		t.Fatalf("print(1) through the installed airlockd: %+v", res)
	}
	t.Logf("print(1) ran through the installed airlockd")

	stop()
	// Nothing may stay mounted after a clean stop, runsc's pin of its
	// empty network namespace included (the gVisor backend's Close
	// releases it).
	if ms, err := mountinfo.Self(); err != nil {
		t.Error(err)
	} else {
		for _, m := range mountinfo.Under(ms, dir) {
			t.Errorf("mount left under the install after airlockd stopped: %s", m)
		}
	}
}

// unmountUnder detaches every mount below dir, deepest first, so that
// the install can be removed.
func unmountUnder(t *testing.T, dir string) {
	ms, err := mountinfo.Self()
	if err != nil {
		t.Error(err)
		return
	}
	points := mountinfo.Under(ms, dir)
	mountinfo.DeepestFirst(points)
	for _, p := range points {
		if err := syscall.Unmount(p, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", p, err)
		}
	}
}

// checkUnits checks that the installed systemd units run the prefix's
// binaries and name documents that are there.
func checkUnits(t *testing.T, prefix string) {
	t.Helper()
	unit := filepath.Join(prefix, "share", "airlock", "systemd", "airlockd.service")
	b, err := os.ReadFile(unit)
	if err != nil {
		t.Fatal(err)
	}
	sawExec := false
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		k, v, ok := strings.Cut(line, "=")
		if !ok || strings.HasPrefix(line, "#") {
			continue
		}
		switch k {
		case "ExecStart":
			sawExec = true
			bin := strings.Fields(v)[0]
			if bin != filepath.Join(prefix, "bin", "airlockd") {
				t.Errorf("%s: ExecStart runs %s, want %s/bin/airlockd", unit, bin, prefix)
			}
		case "Documentation":
			for _, u := range strings.Fields(v) {
				if p, ok := strings.CutPrefix(u, "file://"); ok {
					if _, err := os.Stat(p); err != nil {
						t.Errorf("%s: Documentation names %s, which the install lacks", unit, p)
					}
				}
			}
		}
	}
	if !sawExec {
		t.Errorf("%s has no ExecStart", unit)
	}
}

type execResult struct {
	ExitCode int    `json:"exit_code"`
	Stdout   string `json:"stdout"`
	Stderr   string `json:"stderr"`
}

// execute runs Python code through POST /v1/execute.
func execute(t *testing.T, base, key, code string) execResult {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"language": "python", "code": code, "timeout_sec": 60})
	req, _ := http.NewRequest(http.MethodPost, base+"/v1/execute", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	c := &http.Client{Timeout: 3 * time.Minute}
	r, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	var res execResult
	if r.StatusCode != http.StatusOK {
		var p bytes.Buffer
		p.ReadFrom(r.Body)
		t.Fatalf("POST /v1/execute: %s: %s", r.Status, p.String())
	}
	if err := json.NewDecoder(r.Body).Decode(&res); err != nil {
		t.Fatal(err)
	}
	return res
}

// syncBuffer is a bytes.Buffer for a process's output, read while it
// runs.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
