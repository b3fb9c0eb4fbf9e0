package e2e_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/internal/testenv"
	"github.com/airlockhq/airlock/internal/testenv/testreq"
	"github.com/airlockhq/airlock/internal/testpg"
	"github.com/airlockhq/airlock/store/sqlite"
)

// The harness of the tests that run airlockd as a child process: a node
// is a state directory and a cgroup parent of the test's own, with the
// built images shared into it and airlockd built from this module;
// everything it started and left is removed when the test ends.

// nodeOptions shape a test node.
type nodeOptions struct {
	// name names the state directory and the cgroup parent.
	name string
	// images are the images the test needs (default: base); the test
	// skips without them.
	images []string
	// parents are further cgroup parents to clean, as suffixes of the
	// node's ("-namespaces", "-microvm").
	parents []string
	// bin is an airlockd already built (default: build one).
	bin string
	// listen is the address airlockd serves on (default 127.0.0.1:0: a
	// port of the kernel's choice, new at every start). A node of a fleet
	// needs one fixed address, which it advertises to the others.
	listen string
	// env is added to airlockd's environment at every start.
	env []string
}

// testNode is one airlockd's state directory, cgroup parent and binary,
// and the daemons started on them.
type testNode struct {
	t       *testing.T
	dir     string // the state directory
	parent  string // the cgroup parent
	agent   string // airlock-agent
	bin     string // airlockd
	runsc   string
	listen  string
	env     []string
	daemons []*daemon
}

// quiet are the flags of a node that readies nothing ahead: no pool, no
// warm pairs, no base snapshots, so the sandboxes on the host are the
// test's alone.
var quiet = []string{"--pool-max", "0", "--warm", "", "--warm-sessions", "", "--base-snapshots=false"}

// newTestNode makes a node ready to start, or skips when the machine
// lacks root, runsc or the images.
func newTestNode(t *testing.T, o nodeOptions) *testNode {
	t.Helper()
	testenv.RequireRoot(t)
	n := &testNode{t: t, runsc: testenv.RequireRunsc(t), listen: o.listen, env: o.env}
	if n.listen == "" {
		n.listen = "127.0.0.1:0"
	}
	if len(o.images) == 0 {
		o.images = []string{"base"}
	}
	for _, name := range o.images {
		testenv.Image(t, name)
	}
	n.agent = testenv.Agent(t)
	dir, err := os.MkdirTemp("", "airlock-"+o.name+"-")
	if err != nil {
		t.Fatal(err)
	}
	n.dir, n.parent = dir, "airlock-"+o.name+"-"+testenv.RandomID()
	parents := []string{n.parent}
	for _, p := range o.parents {
		parents = append(parents, n.parent+p)
	}
	t.Cleanup(func() { crashCleanupParents(t, n.dir, parents, n.daemons) })
	if n.bin = o.bin; n.bin == "" {
		n.bin = buildAirlockd(t)
	}
	shareImages(t, filepath.Join(testenv.StateDir(), "images"), filepath.Join(n.dir, "images"))
	return n
}

// startNode makes a node and starts airlockd on it with extra flags.
func startNode(t *testing.T, o nodeOptions, extra ...string) (*testNode, *daemon) {
	t.Helper()
	n := newTestNode(t, o)
	return n, n.start(extra...)
}

// args are the node's own flags (address, state directory, agent, cgroup
// parent) and extra.
func (n *testNode) args(extra ...string) []string {
	return append([]string{"--listen", n.listen, "--state-dir", n.dir, "--agent", n.agent, "--cgroup-parent", n.parent,
		"--build-images=false"}, extra...) // the shared images are read-only
}

// start starts airlockd with the node's flags and extra, and waits until
// it is ready.
func (n *testNode) start(extra ...string) *daemon {
	n.t.Helper()
	return n.startEnv(nil, extra...)
}

// startEnv is start with variables added to the environment (after the
// node's own).
func (n *testNode) startEnv(env []string, extra ...string) *daemon {
	n.t.Helper()
	if len(n.env) > 0 {
		env = append(append([]string{}, n.env...), env...)
	}
	return n.track(startDaemonEnv(n.t, n.bin, n.args(extra...), env))
}

// track makes d one of the node's daemons, killed at the end.
func (n *testNode) track(d *daemon) *daemon {
	n.daemons = append(n.daemons, d)
	return d
}

// key is the default tenant's API key, which the first start wrote.
func (n *testNode) key() string {
	n.t.Helper()
	return n.keyFile("default.key")
}

// adminKey is the operator's key, which the first start wrote.
func (n *testNode) adminKey() string {
	n.t.Helper()
	return n.keyFile("admin.key")
}

// keyFile is the key in the state directory's file name.
func (n *testNode) keyFile(name string) string {
	n.t.Helper()
	b, err := os.ReadFile(filepath.Join(n.dir, name))
	if err != nil {
		n.t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// openStore opens the SQLite store of a state directory: of a running
// airlockd (which reads tenants and keys at every request) or of a
// stopped one. The caller closes it.
func openStore(t *testing.T, stateDir string) (*sqlite.DB, context.Context) {
	t.Helper()
	ctx := context.Background()
	db, err := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(stateDir, "airlock.db")})
	if err != nil {
		t.Fatal(err)
	}
	return db, ctx
}

// newTenantKey makes a tenant and a key for it, minted by mint
// (airlock.NewAPIKey, or airlock.NewE2BAPIKey for E2B's format), in the
// store of the state directory, and returns the key.
func newTenantKey(t *testing.T, stateDir, name string, mint func(tenantID, id string, now time.Time) (string, *airlock.APIKey)) string {
	t.Helper()
	db, ctx := openStore(t, stateDir)
	defer db.Close()
	tn := &airlock.Tenant{Name: name}
	if err := db.CreateTenant(ctx, tn); err != nil {
		t.Fatal(err)
	}
	secret, key := mint(tn.ID, "", time.Now())
	if err := db.CreateAPIKey(ctx, key); err != nil {
		t.Fatal(err)
	}
	return secret
}

// withTenant changes the tenant of that name in the store of the state
// directory with f (airlockd reads the tenant at every request).
func withTenant(t *testing.T, stateDir, name string, f func(ctx context.Context, db *sqlite.DB, tenantID string) error) {
	t.Helper()
	db, ctx := openStore(t, stateDir)
	defer db.Close()
	tn, err := db.TenantByName(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if err := f(ctx, db, tn.ID); err != nil {
		t.Fatal(err)
	}
}

// startPostgres starts a throwaway PostgreSQL server with an empty
// database named airlock, stopped when the test ends, or skips when the
// machine has no PostgreSQL.
func startPostgres(t *testing.T) *testpg.Server {
	t.Helper()
	if _, err := testpg.BinDir(); err != nil {
		testreq.Skip(t, err.Error())
	}
	ctx := context.Background()
	srv, err := testpg.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := srv.Stop(); err != nil {
			t.Errorf("stop PostgreSQL: %v", err)
		}
	})
	if err := srv.CreateDatabase(ctx, "airlock"); err != nil {
		t.Fatal(err)
	}
	return srv
}

// shareImages makes the built images appear at dst, read-only.
//
// A symlink dst -> src would be the simple way, but runsc refuses a rootfs
// path that goes through a symlink ("failed to safely mount: expected to
// open <dst>/.../rootfs/workspace, but found <src>/.../rootfs/workspace"),
// so every sandbox would fail to start. A read-only bind mount works, and
// being read-only it also keeps a careless rm -rf of a leftover temp
// directory from deleting the real images.
func shareImages(t *testing.T, src, dst string) {
	t.Helper()
	if err := os.Mkdir(dst, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount(src, dst, "", unix.MS_BIND, ""); err != nil {
		t.Fatalf("bind %s at %s: %v", src, dst, err)
	}
	if err := unix.Mount("", dst, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY, ""); err != nil {
		t.Fatalf("make %s read-only: %v", dst, err)
	}
}

// buildAirlockd returns cmd/airlockd of this module, with cgo as
// scripts/setup.sh builds it (the guard's Python grammar is C). It is
// built once for the whole package and shared by every node (a link of
// airlockd costs about ten CPU-seconds, and the tests start dozens of
// nodes).
func buildAirlockd(t *testing.T) string {
	t.Helper()
	return sharedCommand(t, "airlockd")
}

// buildCLI puts cmd/airlock of this module into dir and returns its path:
// a copy of the package's one build. It is built with cgo, as airlockd
// is (scripts/setup.sh builds bin/airlock static): its packages are then
// those airlockd's build compiled, and only the link is new.
func buildCLI(t *testing.T, dir string) string {
	t.Helper()
	src := sharedCommand(t, "airlock")
	dst := filepath.Join(dir, "airlock")
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, 0o755); err != nil {
		t.Fatal(err)
	}
	return dst
}

// builds are the commands this package built, each once, in one
// temporary directory that TestMain removes.
var builds struct {
	mu   sync.Mutex
	dir  string
	bins map[string]string // command name -> path
	errs map[string]error  // command name -> why its build failed
}

// sharedCommand builds cmd/NAME of this module with -trimpath and cgo
// (scripts/setup.sh's flags for airlockd, so the compiled packages are
// its) the first time it is asked for, and returns the binary's path.
func sharedCommand(t *testing.T, name string) string {
	t.Helper()
	builds.mu.Lock()
	defer builds.mu.Unlock()
	if bin, ok := builds.bins[name]; ok {
		return bin
	}
	if err, ok := builds.errs[name]; ok {
		t.Fatalf("build %s: %v", name, err)
	}
	bin, err := buildCommand(name)
	if err != nil {
		if builds.errs == nil {
			builds.errs = map[string]error{}
		}
		builds.errs[name] = err
		t.Fatalf("build %s: %v", name, err)
	}
	if builds.bins == nil {
		builds.bins = map[string]string{}
	}
	builds.bins[name] = bin
	return bin
}

// buildCommand builds cmd/NAME into the builds directory; builds.mu is
// held.
func buildCommand(name string) (string, error) {
	gomod, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	root := filepath.Dir(strings.TrimSpace(string(gomod)))
	if root == "." || root == "" {
		return "", fmt.Errorf("not inside a module (GOMOD %q)", gomod)
	}
	if builds.dir == "" {
		if builds.dir, err = os.MkdirTemp("", "airlock-e2e-bin-"); err != nil {
			return "", err
		}
	}
	bin := filepath.Join(builds.dir, name)
	cmd := exec.Command("go", "build", "-trimpath", "-o", bin, "./cmd/"+name)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=1")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("%v\n%s", err, out)
	}
	return bin, nil
}

// TestMain removes the binaries the package built.
func TestMain(m *testing.M) {
	code := m.Run()
	if builds.dir != "" {
		os.RemoveAll(builds.dir)
	}
	os.Exit(code)
}

// daemon is an airlockd child process.
type daemon struct {
	cmd    *exec.Cmd
	url    string
	exited chan struct{}
	err    error // of Wait, once exited is closed

	mu  sync.Mutex
	log bytes.Buffer
}

// servingAddr finds the API's address in airlockd's log, text or JSON.
var servingAddr = regexp.MustCompile(`(?:msg="airlockd serving" addr=|"msg":"airlockd serving","addr":")(127\.0\.0\.1:\d+)`)

// startDaemon starts airlockd and waits until /readyz answers 200.
func startDaemon(t *testing.T, bin string, args []string) *daemon {
	t.Helper()
	return startDaemonEnv(t, bin, args, nil)
}

// startDaemonEnv is startDaemon with variables added to the environment.
func startDaemonEnv(t *testing.T, bin string, args, env []string) *daemon {
	t.Helper()
	d := startServing(t, bin, args, env)
	waitFor(t, 30*time.Second, "airlockd /readyz", func() bool {
		resp, err := http.Get(d.url + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return d
}

// startServing starts airlockd and waits until it serves, ready or not.
func startServing(t *testing.T, bin string, args, env []string) *daemon {
	t.Helper()
	d := &daemon{cmd: exec.Command(bin, args...), exited: make(chan struct{})}
	if env != nil {
		d.cmd.Env = append(os.Environ(), env...)
	}
	stderr, err := d.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	d.cmd.Stdout = io.Discard
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	addr := make(chan string, 1)
	logDone := make(chan struct{})
	go func() {
		defer close(logDone)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			d.mu.Lock()
			d.log.WriteString(line + "\n")
			d.mu.Unlock()
			if m := servingAddr.FindStringSubmatch(line); m != nil {
				select {
				case addr <- m[1]:
				default:
				}
			}
		}
	}()
	go func() {
		<-logDone // Wait closes the pipe: read it to the end first
		d.err = d.cmd.Wait()
		close(d.exited)
	}()
	select {
	case a := <-addr:
		d.url = "http://" + a
	case <-d.exited:
		t.Fatalf("airlockd exited at start: %v\n%s", d.err, d.logs())
	case <-time.After(60 * time.Second):
		t.Fatalf("airlockd did not serve within 60s\n%s", d.logs())
	}
	return d
}

func (d *daemon) logs() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.log.String()
}

func (d *daemon) pid() int { return d.cmd.Process.Pid }

func (d *daemon) running() bool {
	select {
	case <-d.exited:
		return false
	default:
		return true
	}
}

// kill sends SIGKILL to airlockd (not its process group) and reaps it.
func (d *daemon) kill(t *testing.T) {
	t.Helper()
	if !d.running() {
		return
	}
	syscall.Kill(d.pid(), syscall.SIGKILL)
	select {
	case <-d.exited:
	case <-time.After(30 * time.Second):
		t.Errorf("airlockd %d did not die of SIGKILL", d.pid())
	}
}

// stop sends SIGTERM and expects a clean exit.
func (d *daemon) stop(t *testing.T) {
	t.Helper()
	syscall.Kill(d.pid(), syscall.SIGTERM)
	select {
	case <-d.exited:
		if d.err != nil {
			t.Errorf("airlockd exited with %v after SIGTERM\n%s", d.err, d.logs())
		}
	case <-time.After(60 * time.Second):
		t.Errorf("airlockd did not stop within 60s of SIGTERM")
		d.kill(t)
	}
}

func newClient(t *testing.T, url, key string) *client.Client {
	t.Helper()
	c, err := client.New(client.Config{BaseURL: url, APIKey: key})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// waitFor polls cond every 100ms until it holds or the time is up.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// crashCleanup removes everything the test may have left, even after a
// failure midway: the airlockd children, processes of their sandboxes,
// mounts, cgroups and the state directory.
func crashCleanup(t *testing.T, tmp, parent string, daemons []*daemon) {
	crashCleanupParents(t, tmp, []string{parent}, daemons)
}

// crashCleanupParents is crashCleanup for sandboxes under several cgroup
// parents (gVisor's, and the namespaces backend's beside it).
func crashCleanupParents(t *testing.T, tmp string, parents []string, daemons []*daemon) {
	for _, d := range daemons {
		if d.running() {
			syscall.Kill(d.pid(), syscall.SIGKILL)
			select {
			case <-d.exited:
			case <-time.After(10 * time.Second):
			}
		}
		if t.Failed() {
			t.Logf("airlockd %d log:\n%s", d.pid(), d.logs())
		}
	}
	// Sandbox processes: runsc and its sandbox, gofer and stubs, all
	// started by our airlockd children for this state directory.
	for attempt := 0; attempt < 50; attempt++ {
		pids := runscProcesses(tmp, 0)
		if len(pids) == 0 {
			break
		}
		for _, pid := range pids {
			syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, d := range cgroupDirsOf(parents) {
		// Kill whatever is still in the cgroups (stubs whose command line
		// does not name tmp).
		filepath.WalkDir(d, func(p string, de os.DirEntry, err error) error {
			if err == nil && de.IsDir() {
				if b, err := os.ReadFile(filepath.Join(p, "cgroup.procs")); err == nil {
					for _, f := range strings.Fields(string(b)) {
						if pid, err := strconv.Atoi(f); err == nil && pid > 1 {
							syscall.Kill(pid, syscall.SIGKILL)
						}
					}
				}
			}
			return nil
		})
	}
	mounts := mountsUnder(t, tmp)
	sort.Sort(sort.Reverse(sort.StringSlice(mounts))) // deepest first
	var stuck []string
	for _, m := range mounts {
		if err := unix.Unmount(m, 0); err != nil && !errors.Is(err, unix.EINVAL) {
			if err := unix.Unmount(m, unix.MNT_DETACH); err != nil {
				stuck = append(stuck, m)
			}
		}
	}
	for _, d := range cgroupDirsOf(parents) {
		var dirs []string
		filepath.WalkDir(d, func(p string, de os.DirEntry, err error) error {
			if err == nil && de.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		for i := len(dirs) - 1; i >= 0; i-- { // children first
			for attempt := 0; attempt < 20; attempt++ {
				if err := os.Remove(dirs[i]); err == nil || errors.Is(err, os.ErrNotExist) {
					break
				}
				time.Sleep(50 * time.Millisecond)
			}
		}
		if _, err := os.Stat(d); err == nil {
			t.Errorf("cleanup: cgroup %s could not be removed", d)
		}
	}
	if len(stuck) > 0 {
		t.Errorf("cleanup: mounts could not be removed, leaving %s in place: %v", tmp, stuck)
		return
	}
	if err := os.RemoveAll(tmp); err != nil {
		t.Errorf("cleanup: %v", err)
	}
}
