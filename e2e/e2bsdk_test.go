package e2e_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/testenv"
	"github.com/airlockhq/airlock/internal/testenv/testreq"
)

// minNode is the oldest Node the pinned SDKs support (their engines
// field: >=20.18.1 <21 || >=22).
var minNode = [3]int{20, 18, 1}

// requireNode returns node and npm, or skips (fails under
// AIRLOCK_TEST_REQUIRE=1) when they are missing or too old.
func requireNode(t *testing.T) (node, npm string) {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		testreq.Skip(t, "node is not installed; the E2B SDK test needs Node 20.18.1 or newer (scripts/setup.sh checks)")
	}
	npm, err = exec.LookPath("npm")
	if err != nil {
		testreq.Skip(t, "npm is not installed; the E2B SDK test installs the SDKs with npm ci")
	}
	out, err := exec.Command(node, "--version").Output()
	m := regexp.MustCompile(`^v(\d+)\.(\d+)\.(\d+)`).FindStringSubmatch(strings.TrimSpace(string(out)))
	if err != nil || m == nil {
		testreq.Skipf(t, "node --version: %v %q", err, out)
	}
	var v [3]int
	for i := range v {
		v[i], _ = strconv.Atoi(m[i+1])
	}
	if v[0] == 21 || v[0] < 20 || v[0] == 20 && (v[1] < minNode[1] || v[1] == minNode[1] && v[2] < minNode[2]) {
		testreq.Skipf(t, "node %s is too old or unsupported: the E2B SDKs need >=20.18.1 <21 || >=22", strings.TrimSpace(string(out)))
	}
	return node, npm
}

// sdkDir is e2e/e2bsdk of this module.
func sdkDir(t *testing.T) string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "e2bsdk")
}

// installSDK copies the SDK package to dir and installs its locked
// dependencies there with npm ci.
func installSDK(t *testing.T, npm, dir string) {
	t.Helper()
	for _, f := range []string{"package.json", "package-lock.json", "smoke.mjs", "gethost.mjs"} {
		b, err := os.ReadFile(filepath.Join(sdkDir(t), f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	start := time.Now()
	cmd := exec.CommandContext(ctx, npm, "ci", "--no-audit", "--no-fund", "--loglevel=error")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("npm ci: %v\n%s", err, out)
	}
	t.Logf("npm ci took %v", time.Since(start).Round(time.Millisecond))
}

// TestE2BSDK runs E2B's published JavaScript SDKs (e2b 2.51.0,
// @e2b/code-interpreter 2.8.0, installed by npm ci from the committed
// lockfile), unchanged, against the real airlockd, with nothing but
// E2B_API_URL, E2B_SANDBOX_URL and E2B_API_KEY set: sandboxes, commands
// (exit codes, stdin, kill, reattaching), files, the code interpreter (results, a
// PNG, an error, contexts), list, timeouts, kill, and the refusals (a
// wrong token, another tenant's key, no key). See e2bsdk/smoke.mjs.
// After airlockd stops, nothing of a sandbox is left on the host.
func TestE2BSDK(t *testing.T) {
	testenv.RequireRoot(t)
	runsc := testenv.RequireRunsc(t)
	testenv.Image(t, "base")
	testenv.Image(t, "python-ds")
	node, npm := requireNode(t)
	agent := os.Getenv("AIRLOCK_TEST_AGENT")
	if agent == "" {
		testreq.Skip(t, "AIRLOCK_TEST_AGENT is not set; scripts/test.sh sets it to the agent the images carry")
	}
	n := newTestNode(t, nodeOptions{name: "e2bsdk"})
	tmp, parent, runsc := n.dir, n.parent, n.runsc
	pkg := filepath.Join(tmp, "sdk")
	if err := os.Mkdir(pkg, 0o755); err != nil {
		t.Fatal(err)
	}
	installed := make(chan struct{})
	go func() { defer close(installed); installSDK(t, npm, pkg) }()
	d := n.start("--warm", "", "--warm-sessions", "python-ds/small", "--pool-max", "1", "--keep-sessions=false", "--session-sample-interval", "500ms")
	keyA := newTenantKey(t, tmp, "sdk-a", airlock.NewE2BAPIKey)
	keyB := newTenantKey(t, tmp, "sdk-b", airlock.NewE2BAPIKey)
	<-installed
	if t.Failed() {
		return
	}

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "smoke.mjs")
	cmd.Dir = pkg
	cmd.Env = append(os.Environ(),
		"E2B_API_URL="+d.url, "E2B_SANDBOX_URL="+d.url, "E2B_API_KEY="+keyA,
		"AIRLOCK_OTHER_KEY="+keyB, "E2B_DEBUG=")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err := cmd.Run()
	t.Logf("smoke.mjs (%v):\n%s", time.Since(start).Round(time.Millisecond), out.String())
	if err != nil || !strings.Contains(out.String(), "ok: all checks passed") {
		t.Fatalf("the E2B SDK script failed: %v", err)
	}

	d.stop(t)
	if after := observe(t, runsc, tmp, parent, 0); !after.empty() {
		t.Errorf("left after a clean stop: %s", after)
	}
}
