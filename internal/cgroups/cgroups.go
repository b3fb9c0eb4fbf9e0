package cgroups

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Root is where cgroup file systems are mounted.
const Root = "/sys/fs/cgroup"

// Limits to apply to a cgroup. Zero means unlimited / unchanged.
type Limits struct {
	MemoryBytes int64   // hard limit; swap is disallowed as well
	CPUs        float64 // CFS quota in CPUs
	Pids        int64   // host tasks (a backstop: runsc enforces the sandbox's own limit)
}

// Stats measured from outside.
type Stats struct {
	MemoryBytes     int64
	PeakMemoryBytes int64
	OOMKills        int64
	CPUTime         time.Duration
	Pids            int64
	PidsLimitHits   int64 // forks refused at pids.max (pids.events)
	MemoryLimitHits int64 // times usage hit the memory limit (v1 failcnt, v2 memory.events max)
}

// Manager manages cgroups of one version.
type Manager interface {
	// Create makes the cgroup (and parents) and applies limits.
	Create(path string, l Limits) error
	Stats(path string) (Stats, error)
	// CPUWait is the time the cgroup's live threads have waited on a run
	// queue for a CPU (their schedstat): with the CPU time, what they
	// would have used on an idle host. It reads a file per thread.
	CPUWait(path string) time.Duration
	// Kill sends SIGKILL to every process in the cgroup.
	Kill(path string) error
	// Add moves the process pid into the cgroup (every controller of it).
	Add(path string, pid int) error
	// ThreadFiles lists the files a thread writes "0" into to move itself
	// into the cgroup, where that is cheaper than Add: on v1, each
	// hierarchy's tasks file (moving the calling thread needs no global
	// lock, while moving a whole process waits for an RCU grace period).
	// Nil on v2, where Add is the way.
	ThreadFiles(path string) []string
	// Empty reports whether no process is left in the cgroup (true as well
	// when the cgroup does not exist).
	Empty(path string) bool
	// Freeze stops every process in the cgroup and returns once all are
	// stopped; Thaw lets them run again. A process killed while frozen
	// dies when thawed.
	Freeze(path string) error
	Thaw(path string) error
	// Remove kills what is left and removes the cgroup; it is idempotent.
	Remove(path string) error
	// List returns the child cgroup names under path.
	List(path string) ([]string, error)
	Version() int
}

// Detect returns the manager for this host's cgroup layout.
func Detect() Manager {
	if _, err := os.Stat(filepath.Join(Root, "cgroup.controllers")); err == nil {
		return v2{}
	}
	return v1{}
}

func writeFile(path, value string) error {
	if err := os.WriteFile(path, []byte(value), 0); err != nil {
		return fmt.Errorf("cgroups: write %s: %w", path, err)
	}
	return nil
}

func readInt(path string) (int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	s := strings.TrimSpace(string(b))
	if s == "max" {
		return -1, nil
	}
	return strconv.ParseInt(s, 10, 64)
}

// readKey reads "key value" lines (memory.stat, memory.events, cpu.stat,
// memory.oom_control) and returns the value of key.
func readKey(path, key string) (int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) == 2 && f[0] == key {
			return strconv.ParseInt(f[1], 10, 64)
		}
	}
	return 0, fmt.Errorf("cgroups: %s has no %s", path, key)
}

// waitOf sums the run-queue wait of the threads a cgroup's threads file
// lists (/proc/<tid>/schedstat: run, wait, slices in nanoseconds).
func waitOf(threadsFile string) time.Duration {
	b, err := os.ReadFile(threadsFile)
	if err != nil {
		return 0
	}
	var sum int64
	for _, f := range strings.Fields(string(b)) {
		s, err := os.ReadFile("/proc/" + f + "/schedstat")
		if err != nil {
			continue
		}
		if parts := strings.Fields(string(s)); len(parts) >= 2 {
			if n, err := strconv.ParseInt(parts[1], 10, 64); err == nil {
				sum += n
			}
		}
	}
	return time.Duration(sum)
}

func killProcs(procsFile string) error {
	b, err := os.ReadFile(procsFile)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return err
	}
	for _, f := range strings.Fields(string(b)) {
		if pid, err := strconv.Atoi(f); err == nil && pid > 0 {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	return nil
}

// rmdirRetry removes a cgroup directory, killing its processes and
// retrying while they exit.
func rmdirRetry(dir, procsFile string) error {
	var err error
	for i := 0; i < 50; i++ {
		err = os.Remove(dir)
		if err == nil || errors.Is(err, os.ErrNotExist) {
			return nil
		}
		killProcs(procsFile)
		time.Sleep(time.Duration(i+1) * 5 * time.Millisecond)
	}
	return fmt.Errorf("cgroups: remove %s: %w", dir, err)
}

func listDirs(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil
		}
		return nil, err
	}
	var names []string
	for _, e := range entries {
		if e.IsDir() {
			names = append(names, e.Name())
		}
	}
	return names, nil
}

// procsEmpty reports whether a cgroup.procs file lists no process.
func procsEmpty(procsFile string) bool {
	b, err := os.ReadFile(procsFile)
	return err != nil || len(strings.TrimSpace(string(b))) == 0
}

// waitFor polls cond with a growing pause until it holds or timeout passes.
func waitFor(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for wait := 20 * time.Microsecond; ; wait = min(2*wait, 5*time.Millisecond) {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(wait)
	}
}
