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
)

// TestCrashRecovery kills airlockd with SIGKILL while an execution runs
// (and, with airlockd's defaults, pool members and snapshot builds too),
// starts it again on the same state directory, and checks that the
// reconciler ended everything the crashed process left on the host
// (processes, mounts, cgroups, run directories, runsc containers) and
// recorded the interrupted execution as failed; then that a clean stop
// leaves nothing at all.
func TestCrashRecovery(t *testing.T) {
	testenv.RequireRoot(t)
	runsc := testenv.RequireRunsc(t)
	testenv.Image(t, "base")
	testenv.Image(t, "python-ds")
	agent := testenv.Agent(t)

	tmp, err := os.MkdirTemp("", "airlock-crash-")
	if err != nil {
		t.Fatal(err)
	}
	parent := "airlock-crash-" + testenv.RandomID()
	sandboxes := filepath.Join(tmp, "gvisor", "sandboxes")
	var daemons []*daemon
	t.Cleanup(func() { crashCleanup(t, tmp, parent, daemons) })

	bin := buildAirlockd(t, tmp)
	shareImages(t, filepath.Join(testenv.StateDir(), "images"), filepath.Join(tmp, "images"))
	args := []string{"--listen", "127.0.0.1:0", "--state-dir", tmp, "--agent", agent, "--cgroup-parent", parent}

	// First run: start a long execution and wait until its sandbox runs.
	d1 := startDaemon(t, bin, args)
	daemons = append(daemons, d1)
	keyBytes, err := os.ReadFile(filepath.Join(tmp, "default.key"))
	if err != nil {
		t.Fatal(err)
	}
	key := strings.TrimSpace(string(keyBytes))
	c1 := newClient(t, d1.url, key)

	type result struct {
		e   *airlock.Execution
		err error
	}
	done := make(chan result, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		e, err := c1.Execute(ctx, airlock.ExecuteRequest{Language: airlock.Bash, Code: "touch /tmp/started; sleep 60", TimeoutSec: 90})
		done <- result{e, err}
	}()

	var execID string
	waitFor(t, 30*time.Second, "the sandbox to run", func() bool {
		entries, _ := os.ReadDir(sandboxes)
		if len(entries) == 0 || len(runscProcesses(tmp, d1.pid())) == 0 || len(mountsUnder(t, sandboxes)) == 0 {
			return false
		}
		p, err := c1.ListExecutions(context.Background(), 0, "")
		if err != nil || len(p.Executions) != 1 || p.Executions[0].Status != airlock.StatusRunning {
			return false
		}
		execID = p.Executions[0].ID
		return true
	})
	waitFor(t, 30*time.Second, "the program to start (its mark in its /tmp)", func() bool {
		marks, _ := filepath.Glob(filepath.Join(sandboxes, "*", "disk", "tmp", "started")) // a pool member or its own
		return len(marks) == 1
	})

	// Crash: SIGKILL airlockd alone. Its sandboxes outlive it: the one
	// running the execution, and any pool members or snapshot builds.
	d1.kill(t)
	if r := <-done; r.err == nil {
		t.Fatalf("execute returned %+v after airlockd was killed", r.e)
	}
	left := observe(t, runsc, tmp, parent, 0)
	t.Logf("left by the crash: %d processes, %d mounts, %d cgroups, runsc containers %v, of sandboxes %v",
		len(left.pids), len(left.mounts), len(left.cgroups), left.containers, left.dirs)
	// A sandbox runs attached to its `runsc run`, whose stdio was
	// airlockd's: the agent sees EOF and the sandbox may end on its own
	// soon after the crash, so its processes may or may not be here yet.
	// The disk mounts, cgroups and run directories airlockd made stay
	// until the reconciler removes them.
	if len(left.pids) == 0 && len(left.mounts) == 0 {
		t.Fatalf("the crash left no runsc process and no mount: nothing for the reconciler to do, so the test proves nothing")
	}
	if len(left.mounts) == 0 || len(left.cgroups) == 0 || len(left.dirs) == 0 {
		t.Errorf("the crash left mounts %v, cgroups %v, run directories %v: expected those of the running sandbox", left.mounts, left.cgroups, left.dirs)
	}

	// Second run on the same state: the reconciler ends what the first
	// left before serving. The new airlockd starts sandboxes of its own
	// (pool members, snapshot builds), so leftovers are told by their IDs.
	d2 := startDaemon(t, bin, args)
	daemons = append(daemons, d2)
	now := observe(t, runsc, tmp, parent, d2.pid())
	for id := range left.ids() {
		if got := now.mentioning(id); !got.empty() {
			t.Errorf("sandbox %s of the crashed airlockd is still on the host after restart: %s", id, got)
		} else if len(got.runscCgroups) > 0 {
			t.Logf("KNOWN LEAK (not failed on): runsc's cgroups of sandbox %s left after restart: %v", id, got.runscCgroups)
		}
	}
	for _, pid := range left.pids {
		if cmdlineMentions(pid, tmp) {
			t.Errorf("process %v of the crashed airlockd still runs after restart", describePids([]int{pid}))
		}
	}

	c2 := newClient(t, d2.url, key)
	ctx := context.Background()
	p, err := c2.ListExecutions(ctx, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Executions) != 1 || p.Executions[0].ID != execID {
		t.Fatalf("executions after restart: %d, want the interrupted %s", len(p.Executions), execID)
	}
	if e := p.Executions[0]; e.Status != airlock.StatusFailed || e.Error == "" {
		t.Errorf("interrupted execution: status %q error %q, want failed with a reason", e.Status, e.Error)
	} else {
		t.Logf("interrupted execution recorded: status %s, error %q", e.Status, e.Error)
	}

	// The restarted service works.
	e, err := c2.Execute(ctx, airlock.ExecuteRequest{Language: airlock.Bash, Code: "echo recovered"})
	if err != nil {
		t.Fatal(err)
	}
	wantResult(t, e, 0, false, false)
	wantStdout(t, e, "recovered\n")

	// A clean stop leaves nothing at all: no process, mount, cgroup, run
	// directory or runsc container of this state directory.
	d2.stop(t)
	after := observe(t, runsc, tmp, parent, 0)
	if !after.empty() {
		t.Errorf("left after a clean stop: %s", after)
	}
	if len(after.runscCgroups) > 0 {
		t.Logf("KNOWN LEAK (not failed on): runsc's cgroups left after a clean stop: %v", after.runscCgroups)
	}
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// hostState is what of a state directory's sandboxes is on the host.
type hostState struct {
	pids       []int    // processes whose command line mentions the state directory
	cmdlines   []string // of pids
	mounts     []string // under <state>/gvisor/sandboxes
	cgroups    []string // below the cgroup parent: v2, or the v1 hierarchies airlock manages
	dirs       []string // run directories: <state>/gvisor/sandboxes/<id>
	containers []string // runsc list

	// runscCgroups are below the cgroup parent in the other v1
	// hierarchies (blkio, cpuset, devices, freezer, name=systemd), which
	// runsc creates and airlock neither removes nor checks. They leak
	// when runsc is killed before it deletes its container (see the
	// report); they are logged, not failed on, and removed at cleanup.
	runscCgroups []string
}

// managedV1 are the cgroup v1 hierarchies airlock itself creates, limits,
// removes and checks (internal/cgroups).
var managedV1 = map[string]bool{"memory": true, "cpu": true, "cpuacct": true, "pids": true}

// observe looks at the host for the sandboxes of the state directory tmp,
// ignoring the process except (a running airlockd).
func observe(t *testing.T, runsc, tmp, parent string, except int) hostState {
	t.Helper()
	sandboxes := filepath.Join(tmp, "gvisor", "sandboxes")
	var h hostState
	h.pids = runscProcesses(tmp, except)
	h.cmdlines = describePids(h.pids)
	h.mounts = mountsUnder(t, sandboxes)
	v2 := fileExists("/sys/fs/cgroup/cgroup.controllers")
	for _, c := range cgroupChildren(parent) {
		hier, _, _ := strings.Cut(strings.TrimPrefix(c, "/sys/fs/cgroup/"), "/")
		if v2 || managedV1[hier] {
			h.cgroups = append(h.cgroups, c)
		} else {
			h.runscCgroups = append(h.runscCgroups, c)
		}
	}
	entries, err := os.ReadDir(sandboxes)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	for _, e := range entries {
		h.dirs = append(h.dirs, e.Name())
	}
	out, err := exec.Command(runsc, "--root", filepath.Join(tmp, "gvisor", "runsc"), "list", "--quiet").CombinedOutput()
	if err != nil {
		t.Errorf("runsc list: %v: %s", err, out)
	}
	h.containers = strings.Fields(string(out))
	return h
}

// ids returns the sandbox IDs in h: names of run directories, cgroups and
// runsc containers.
func (h hostState) ids() map[string]bool {
	ids := map[string]bool{}
	for _, d := range h.dirs {
		ids[d] = true
	}
	for _, cgs := range [][]string{h.cgroups, h.runscCgroups} {
		for _, c := range cgs {
			ids[filepath.Base(c)] = true
		}
	}
	for _, c := range h.containers {
		ids[c] = true
	}
	return ids
}

// mentioning returns the part of h that belongs to sandbox id.
func (h hostState) mentioning(id string) hostState {
	var out hostState
	for i, pid := range h.pids {
		if strings.Contains(h.cmdlines[i], id) {
			out.pids = append(out.pids, pid)
			out.cmdlines = append(out.cmdlines, h.cmdlines[i])
		}
	}
	for _, m := range h.mounts {
		if strings.Contains(m, "/"+id+"/") || strings.HasSuffix(m, "/"+id) {
			out.mounts = append(out.mounts, m)
		}
	}
	for _, c := range h.cgroups {
		if filepath.Base(c) == id {
			out.cgroups = append(out.cgroups, c)
		}
	}
	for _, c := range h.runscCgroups {
		if filepath.Base(c) == id {
			out.runscCgroups = append(out.runscCgroups, c)
		}
	}
	for _, d := range h.dirs {
		if d == id {
			out.dirs = append(out.dirs, d)
		}
	}
	for _, c := range h.containers {
		if c == id {
			out.containers = append(out.containers, c)
		}
	}
	return out
}

func (h hostState) empty() bool {
	return len(h.pids)+len(h.mounts)+len(h.cgroups)+len(h.dirs)+len(h.containers) == 0
}

func (h hostState) String() string {
	return fmt.Sprintf("processes %v; mounts %v; cgroups %v; run directories %v; runsc containers %v (and runsc's cgroups %v)",
		h.cmdlines, h.mounts, h.cgroups, h.dirs, h.containers, h.runscCgroups)
}

// cmdlineMentions reports whether process pid runs with s in its command line.
func cmdlineMentions(pid int, s string) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return err == nil && bytes.Contains(b, []byte(s))
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

// buildAirlockd builds cmd/airlockd of this module into dir, with cgo as
// scripts/setup.sh builds it (the guard's Python grammar is C).
func buildAirlockd(t *testing.T, dir string) string {
	t.Helper()
	gomod, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		t.Fatalf("go env GOMOD: %v", err)
	}
	root := filepath.Dir(strings.TrimSpace(string(gomod)))
	if root == "." || root == "" {
		t.Fatalf("not inside a module (GOMOD %q)", gomod)
	}
	bin := filepath.Join(dir, "airlockd")
	cmd := exec.Command("go", "build", "-trimpath", "-o", bin, "./cmd/airlockd")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=1")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build airlockd: %v\n%s", err, out)
	}
	return bin
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

var servingAddr = regexp.MustCompile(`msg="airlockd serving" addr=(127\.0\.0\.1:\d+)`)

// startDaemon starts airlockd and waits until /readyz answers 200.
func startDaemon(t *testing.T, bin string, args []string) *daemon {
	t.Helper()
	return startDaemonEnv(t, bin, args, nil)
}

// startDaemonEnv is startDaemon with variables added to the environment.
func startDaemonEnv(t *testing.T, bin string, args, env []string) *daemon {
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

// runscProcesses lists processes whose command line mentions dir (as a
// whole path or a path below it), except the one with PID except (the
// current airlockd). Zombies have an empty command line and do not count.
func runscProcesses(dir string, except int) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == except || pid == os.Getpid() {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !(bytes.Contains(b, []byte(dir+"/")) || bytes.Contains(b, []byte(dir+"\x00"))) {
			continue
		}
		out = append(out, pid)
	}
	return out
}

// describePids returns each PID with its command line, for messages.
func describePids(pids []int) []string {
	var out []string
	for _, pid := range pids {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		cmd := strings.ReplaceAll(string(bytes.TrimRight(b, "\x00")), "\x00", " ")
		if len(cmd) > 160 {
			cmd = cmd[:160] + "..."
		}
		out = append(out, fmt.Sprintf("%d: %s", pid, cmd))
	}
	return out
}

// mountsUnder lists mount points at or below dir from /proc/self/mountinfo,
// in mount order.
func mountsUnder(t *testing.T, dir string) []string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 {
			continue
		}
		mp := unescapeOctal(f[4])
		if mp == dir || strings.HasPrefix(mp, dir+"/") {
			out = append(out, mp)
		}
	}
	return out
}

// unescapeOctal decodes mountinfo's \NNN escapes.
func unescapeOctal(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// cgroupDirs returns the directories of the cgroup parent: one per v1
// hierarchy, or the one v2 directory.
func cgroupDirs(parent string) []string {
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		return []string{filepath.Join("/sys/fs/cgroup", parent)}
	}
	hier, _ := filepath.Glob("/sys/fs/cgroup/*")
	var out []string
	for _, h := range hier {
		if fi, err := os.Stat(filepath.Join(h, parent)); err == nil && fi.IsDir() {
			out = append(out, filepath.Join(h, parent))
		}
	}
	return out
}

// cgroupDirsOf is cgroupDirs of every parent.
func cgroupDirsOf(parents []string) []string {
	var out []string
	for _, p := range parents {
		out = append(out, cgroupDirs(p)...)
	}
	return out
}

// cgroupChildren lists every cgroup below the parent, in every hierarchy.
func cgroupChildren(parent string) []string {
	var out []string
	for _, d := range cgroupDirs(parent) {
		filepath.WalkDir(d, func(p string, de os.DirEntry, err error) error {
			if err == nil && de.IsDir() && p != d {
				out = append(out, p)
			}
			return nil
		})
	}
	return out
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
