package e2e_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
)

// TestCrashRecovery kills airlockd with SIGKILL while an execution runs
// (and, with airlockd's defaults, pool members and snapshot builds too),
// starts it again on the same state directory, and checks that the
// reconciler ended everything the crashed process left on the host
// (processes, mounts, cgroups, run directories, runsc containers) and
// recorded the interrupted execution as failed; then that a clean stop
// leaves nothing at all.
func TestCrashRecovery(t *testing.T) {
	n := newTestNode(t, nodeOptions{name: "crash", images: []string{"base", "python-ds"}})
	tmp, parent, bin, runsc := n.dir, n.parent, n.bin, n.runsc
	sandboxes := filepath.Join(tmp, "gvisor", "sandboxes")

	args := n.args()

	// First run: start a long execution and wait until its sandbox runs.
	d1 := n.track(startDaemon(t, bin, args))
	key := n.key()
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
	d2 := n.track(startDaemon(t, bin, args))
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
