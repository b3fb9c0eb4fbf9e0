package cgroups

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// v2 drives the unified hierarchy.
type v2 struct{}

func (v2) Version() int { return 2 }

func (v2) dir(path string) string { return filepath.Join(Root, path) }

func (c v2) Create(path string, l Limits) error {
	// Enable the controllers we need on every ancestor below the root.
	parts := strings.Split(filepath.Clean(path), "/")
	cur := Root
	for _, p := range parts {
		if p == "" {
			continue
		}
		writeFile(filepath.Join(cur, "cgroup.subtree_control"), "+memory +cpu +pids")
		cur = filepath.Join(cur, p)
		if err := os.Mkdir(cur, 0o755); err != nil && !os.IsExist(err) {
			c.Remove(path)
			return fmt.Errorf("cgroups: create: %w", err)
		}
	}
	dir := c.dir(path)
	if l.MemoryBytes > 0 {
		if err := writeFile(filepath.Join(dir, "memory.max"), strconv.FormatInt(l.MemoryBytes, 10)); err != nil {
			c.Remove(path)
			return err
		}
		writeFile(filepath.Join(dir, "memory.swap.max"), "0")
	}
	if l.CPUs > 0 {
		period := int64(100000)
		if err := writeFile(filepath.Join(dir, "cpu.max"), fmt.Sprintf("%d %d", int64(l.CPUs*float64(period)), period)); err != nil {
			c.Remove(path)
			return err
		}
	}
	if l.Pids > 0 {
		if err := writeFile(filepath.Join(dir, "pids.max"), strconv.FormatInt(l.Pids, 10)); err != nil {
			c.Remove(path)
			return err
		}
	}
	return nil
}

func (c v2) Stats(path string) (Stats, error) {
	var s Stats
	var err error
	dir := c.dir(path)
	if s.MemoryBytes, err = readInt(filepath.Join(dir, "memory.current")); err != nil {
		return s, fmt.Errorf("cgroups: stats: %w", err)
	}
	s.PeakMemoryBytes, _ = readInt(filepath.Join(dir, "memory.peak"))
	s.OOMKills, _ = readKey(filepath.Join(dir, "memory.events"), "oom_kill")
	s.MemoryLimitHits, _ = readKey(filepath.Join(dir, "memory.events"), "max")
	if us, err := readKey(filepath.Join(dir, "cpu.stat"), "usage_usec"); err == nil {
		s.CPUTime = time.Duration(us) * time.Microsecond
	}
	s.Pids, _ = readInt(filepath.Join(dir, "pids.current"))
	s.PidsLimitHits, _ = readKey(filepath.Join(dir, "pids.events"), "max")
	return s, nil
}

func (c v2) CPUWait(path string) time.Duration {
	return waitOf(filepath.Join(c.dir(path), "cgroup.threads"))
}

func (c v2) Kill(path string) error {
	dir := c.dir(path)
	defer c.Thaw(path) // frozen processes die only once thawed
	if err := writeFile(filepath.Join(dir, "cgroup.kill"), "1"); err == nil {
		return nil
	}
	return killProcs(filepath.Join(dir, "cgroup.procs"))
}

func (c v2) Add(path string, pid int) error {
	return writeFile(filepath.Join(c.dir(path), "cgroup.procs"), strconv.Itoa(pid))
}

func (v2) ThreadFiles(string) []string { return nil }

func (c v2) Remove(path string) error {
	dir := c.dir(path)
	c.Kill(path)
	return rmdirRetry(dir, filepath.Join(dir, "cgroup.procs"))
}

func (c v2) List(path string) ([]string, error) { return listDirs(c.dir(path)) }

func (c v2) Empty(path string) bool { return procsEmpty(filepath.Join(c.dir(path), "cgroup.procs")) }

func (c v2) Freeze(path string) error {
	if err := writeFile(filepath.Join(c.dir(path), "cgroup.freeze"), "1"); err != nil {
		return err
	}
	frozen := func() bool {
		v, err := readKey(filepath.Join(c.dir(path), "cgroup.events"), "frozen")
		return err == nil && v == 1
	}
	if !waitFor(5*time.Second, frozen) {
		return fmt.Errorf("cgroups: %s did not freeze", path)
	}
	return nil
}

func (c v2) Thaw(path string) error {
	return writeFile(filepath.Join(c.dir(path), "cgroup.freeze"), "0")
}
