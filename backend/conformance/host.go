package conformance

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/cgroups"
	"github.com/airlockhq/airlock/internal/loopdisk"
	"github.com/airlockhq/airlock/internal/mountinfo"
)

// hostState is what the suite compares before and after a case.
type hostState struct {
	entries   []string // entries of the watched directories
	mounts    []string // mounts at or below them
	cgroups   []string // children of the cgroup parent
	processes []string // descendants of this process, and processes in the cgroup parent: "pid cmdline"
}

func snapshotHost(b airlock.Backend, opts Options) hostState {
	var s hostState
	for _, d := range opts.WatchDirs {
		if es, err := os.ReadDir(d); err == nil {
			for _, e := range es {
				s.entries = append(s.entries, filepath.Join(d, e.Name()))
			}
		}
		if ms, err := loopdisk.MountsUnder(d); err == nil {
			s.mounts = append(s.mounts, ms...)
		}
	}
	if opts.CgroupParent != "" {
		s.cgroups, _ = cgroups.Detect().List(opts.CgroupParent)
	}
	var kept []int
	if k, ok := b.(Keeper); ok {
		kept = k.KeptPIDs()
	}
	s.processes = ownProcesses(opts.CgroupParent, kept)
	for _, xs := range [][]string{s.entries, s.mounts, s.cgroups, s.processes} {
		slices.Sort(xs)
	}
	return s
}

// added returns what is in after and not in before.
func added(before, after []string) []string {
	var out []string
	for _, x := range after {
		if !slices.Contains(before, x) {
			out = append(out, x)
		}
	}
	return out
}

// checkHost fails t if anything of the case's sandboxes is left on the
// host. Teardown that the kernel finishes asynchronously (a process
// being reaped, a namespace being freed) gets a few seconds.
func checkHost(t *testing.T, b airlock.Backend, opts Options, before hostState, netns []string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	var problems []string
	for {
		problems = problems[:0]
		after := snapshotHost(b, opts)
		if x := added(before.entries, after.entries); len(x) > 0 {
			problems = append(problems, fmt.Sprintf("run directories or files left: %v", x))
		}
		if x := added(before.mounts, after.mounts); len(x) > 0 {
			problems = append(problems, fmt.Sprintf("mounts left: %v", x))
		}
		if x := added(before.cgroups, after.cgroups); len(x) > 0 {
			problems = append(problems, fmt.Sprintf("cgroups left under %s: %v", opts.CgroupParent, x))
		}
		if x := added(before.processes, after.processes); len(x) > 0 {
			problems = append(problems, fmt.Sprintf("processes left: %v", x))
		}
		var kept []int
		if k, ok := b.(Keeper); ok {
			kept = k.KeptPIDs()
		}
		if x := liveNetns(netns, kept); len(x) > 0 {
			problems = append(problems, fmt.Sprintf("network namespaces of the case's sandboxes still alive: %v", x))
		}
		if c, ok := b.(Checker); ok {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			if err := c.CheckClean(ctx); err != nil {
				problems = append(problems, fmt.Sprintf("backend check: %v", err))
			}
			cancel()
		}
		if len(problems) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, p := range problems {
		t.Errorf("host not clean after the case: %s", p)
	}
}

// ownProcesses lists the descendants of this process and the processes
// in cgroups under parent, but for those kept, as "pid cmdline".
func ownProcesses(parent string, kept []int) []string {
	self := os.Getpid()
	entries, _ := os.ReadDir("/proc")
	ppid := map[int]int{}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		i := strings.LastIndexByte(string(b), ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b[i+1:]))
		if len(f) < 2 || f[0] == "Z" {
			continue // zombies hold nothing but their PID
		}
		pp, _ := strconv.Atoi(f[1])
		ppid[pid] = pp
		pids = append(pids, pid)
	}
	marker := ""
	if parent != "" {
		marker = "/" + strings.Trim(parent, "/") + "/"
	}
	var out []string
	for _, pid := range pids {
		if slices.Contains(kept, pid) {
			continue
		}
		mine := false
		for p, n := ppid[pid], 0; p > 1 && n < 64; p, n = ppid[p], n+1 {
			if p == self {
				mine = true
				break
			}
		}
		if !mine && marker != "" {
			cg, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
			mine = strings.Contains(string(cg), marker)
		}
		if mine {
			cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
			out = append(out, fmt.Sprintf("%d %s", pid, strings.ReplaceAll(strings.TrimRight(string(cmd), "\x00"), "\x00", " ")))
		}
	}
	return out
}

// liveNetns returns the network namespaces (as "net:[inode]") that some
// host process is still in or that a mount still holds. Kept processes
// are left out: a namespace made after one was freed may get its number.
func liveNetns(netns []string, kept []int) []string {
	if len(netns) == 0 {
		return nil
	}
	want := map[string]bool{}
	for _, n := range netns {
		want[n] = true
	}
	found := map[string]bool{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || slices.Contains(kept, pid) {
			continue
		}
		if l, err := os.Readlink(filepath.Join("/proc", e.Name(), "ns", "net")); err == nil && want[l] {
			found[l] = true
		}
	}
	if ms, err := mountinfo.Self(); err == nil {
		for _, m := range ms {
			if want[m.Root] {
				found[m.Root] = true
			}
		}
	}
	var out []string
	for n := range found {
		out = append(out, n)
	}
	return out
}

// checkOwn fails t if anything carrying one of ids is left on the host:
// an entry of a watched directory, a mount below one, a cgroup under the
// parent, a process in such a cgroup or naming an ID on its command
// line, or a network namespace of the case's sandboxes. It is the check
// of a case that runs beside others (Options.Parallel), which can hold
// it only to what is its own.
func checkOwn(t *testing.T, b airlock.Backend, opts Options, ids, netns []string) {
	t.Helper()
	if len(ids) == 0 {
		return
	}
	mine := func(s string) bool {
		for _, id := range ids {
			if strings.Contains(s, id) {
				return true
			}
		}
		return false
	}
	deadline := time.Now().Add(10 * time.Second)
	var problems []string
	for {
		problems = problems[:0]
		s := snapshotHost(b, opts)
		for _, x := range []struct {
			what string
			have []string
		}{
			{"run directories or files left", s.entries},
			{"mounts left", s.mounts},
			{"cgroups left under " + opts.CgroupParent, s.cgroups},
		} {
			var left []string
			for _, v := range x.have {
				if mine(v) {
					left = append(left, v)
				}
			}
			if len(left) > 0 {
				problems = append(problems, fmt.Sprintf("%s: %v", x.what, left))
			}
		}
		if left := processesOf(opts.CgroupParent, mine); len(left) > 0 {
			problems = append(problems, fmt.Sprintf("processes left: %v", left))
		}
		var kept []int
		if k, ok := b.(Keeper); ok {
			kept = k.KeptPIDs()
		}
		if x := liveNetns(netns, kept); len(x) > 0 {
			problems = append(problems, fmt.Sprintf("network namespaces of the case's sandboxes still alive: %v", x))
		}
		if len(problems) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, p := range problems {
		t.Errorf("host not clean after the case: %s", p)
	}
}

// processesOf lists, as "pid cmdline", the processes whose command line,
// or cgroup below parent, mine says is the case's.
func processesOf(parent string, mine func(string) bool) []string {
	entries, _ := os.ReadDir("/proc")
	marker := ""
	if parent != "" {
		marker = "/" + strings.Trim(parent, "/") + "/"
	}
	var out []string
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err != nil {
			continue
		} else if i := strings.LastIndexByte(string(st), ')'); i < 0 || strings.HasPrefix(strings.TrimSpace(string(st[i+1:])), "Z") {
			continue // zombies hold nothing but their PID
		}
		cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		line := strings.ReplaceAll(strings.TrimRight(string(cmd), "\x00"), "\x00", " ")
		hit := mine(line)
		if !hit && marker != "" {
			cg, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
			for _, l := range strings.Split(string(cg), "\n") {
				if i := strings.Index(l, marker); i >= 0 && mine(l[i+len(marker):]) {
					hit = true
					break
				}
			}
		}
		if hit {
			out = append(out, fmt.Sprintf("%d %s", pid, line))
		}
	}
	return out
}
