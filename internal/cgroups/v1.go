package cgroups

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// v1 drives one hierarchy per controller.
type v1 struct{}

// v1Controllers are the hierarchies Airlock creates cgroups in (and
// limits, but for the freezer).
var v1Controllers = []string{"memory", "cpu", "cpuacct", "pids", "freezer"}

// v1Hierarchies lists the directory name under Root of every mounted v1
// hierarchy (blkio, cpuset, freezer, name=systemd, ... as well): runsc
// creates a sandbox's cgroup in all of them, so all are cleaned.
func v1Hierarchies() []string {
	entries, err := os.ReadDir(Root)
	if err != nil {
		return v1Controllers
	}
	seen := map[string]bool{}
	var out []string
	for _, e := range entries {
		full := filepath.Join(Root, e.Name())
		real, err := filepath.EvalSymlinks(full) // cpu,cpuacct and friends
		if err != nil || seen[real] {
			continue
		}
		if fi, err := os.Stat(filepath.Join(real, "cgroup.procs")); err != nil || fi.IsDir() {
			continue
		}
		seen[real] = true
		out = append(out, filepath.Base(real))
	}
	return out
}

func (v1) Version() int { return 1 }

func (v1) dir(controller, path string) string { return filepath.Join(Root, controller, path) }

func (c v1) Create(path string, l Limits) error {
	for _, ctl := range v1Controllers {
		if err := os.MkdirAll(c.dir(ctl, path), 0o755); err != nil {
			c.Remove(path)
			return fmt.Errorf("cgroups: create %s: %w", ctl, err)
		}
	}
	if l.MemoryBytes > 0 {
		mem := c.dir("memory", path)
		v := strconv.FormatInt(l.MemoryBytes, 10)
		if err := writeFile(filepath.Join(mem, "memory.limit_in_bytes"), v); err != nil {
			c.Remove(path)
			return err
		}
		// memsw exists only with swap accounting; without it there is no swap to limit.
		if _, err := os.Stat(filepath.Join(mem, "memory.memsw.limit_in_bytes")); err == nil {
			if err := writeFile(filepath.Join(mem, "memory.memsw.limit_in_bytes"), v); err != nil {
				c.Remove(path)
				return err
			}
		}
		writeFile(filepath.Join(mem, "memory.swappiness"), "0")
	}
	if l.CPUs > 0 {
		period := int64(100000)
		cpu := c.dir("cpu", path)
		if err := writeFile(filepath.Join(cpu, "cpu.cfs_period_us"), strconv.FormatInt(period, 10)); err != nil {
			c.Remove(path)
			return err
		}
		if err := writeFile(filepath.Join(cpu, "cpu.cfs_quota_us"), strconv.FormatInt(int64(l.CPUs*float64(period)), 10)); err != nil {
			c.Remove(path)
			return err
		}
	}
	if l.Pids > 0 {
		if err := writeFile(filepath.Join(c.dir("pids", path), "pids.max"), strconv.FormatInt(l.Pids, 10)); err != nil {
			c.Remove(path)
			return err
		}
	}
	return nil
}

func (c v1) Stats(path string) (Stats, error) {
	var s Stats
	var err error
	mem := c.dir("memory", path)
	if s.MemoryBytes, err = readInt(filepath.Join(mem, "memory.usage_in_bytes")); err != nil {
		return s, fmt.Errorf("cgroups: stats: %w", err)
	}
	s.PeakMemoryBytes, _ = readInt(filepath.Join(mem, "memory.max_usage_in_bytes"))
	s.OOMKills, _ = readKey(filepath.Join(mem, "memory.oom_control"), "oom_kill")
	s.MemoryLimitHits, _ = readInt(filepath.Join(mem, "memory.failcnt"))
	if ns, err := readInt(filepath.Join(c.dir("cpuacct", path), "cpuacct.usage")); err == nil {
		s.CPUTime = time.Duration(ns)
	}
	s.Pids, _ = readInt(filepath.Join(c.dir("pids", path), "pids.current"))
	s.PidsLimitHits, _ = readKey(filepath.Join(c.dir("pids", path), "pids.events"), "max")
	return s, nil
}

func (c v1) CPUWait(path string) time.Duration {
	return waitOf(filepath.Join(c.dir("cpu", path), "tasks"))
}

func (c v1) Kill(path string) error {
	var errs []error
	for _, ctl := range v1Hierarchies() {
		errs = append(errs, killProcs(filepath.Join(c.dir(ctl, path), "cgroup.procs")))
	}
	c.Thaw(path) // frozen processes die only once thawed
	return errors.Join(errs...)
}

func (c v1) Add(path string, pid int) error {
	v := strconv.Itoa(pid)
	for _, ctl := range v1Controllers {
		if err := writeFile(filepath.Join(c.dir(ctl, path), "cgroup.procs"), v); err != nil {
			return err
		}
	}
	return nil
}

func (c v1) ThreadFiles(path string) []string {
	files := make([]string, len(v1Controllers))
	for i, ctl := range v1Controllers {
		files[i] = filepath.Join(c.dir(ctl, path), "tasks")
	}
	return files
}

func (c v1) Remove(path string) error {
	c.Kill(path) // and thaw: a frozen cgroup's processes never leave it
	var errs []error
	for _, ctl := range v1Hierarchies() {
		dir := c.dir(ctl, path)
		errs = append(errs, rmdirRetry(dir, filepath.Join(dir, "cgroup.procs")))
	}
	return errors.Join(errs...)
}

func (c v1) List(path string) ([]string, error) {
	seen := map[string]bool{}
	var out []string
	for _, ctl := range v1Hierarchies() {
		names, err := listDirs(c.dir(ctl, path))
		if err != nil {
			return nil, err
		}
		for _, n := range names {
			if !seen[n] {
				seen[n] = true
				out = append(out, n)
			}
		}
	}
	return out, nil
}

func (c v1) Empty(path string) bool {
	for _, ctl := range v1Hierarchies() {
		if !procsEmpty(filepath.Join(c.dir(ctl, path), "cgroup.procs")) {
			return false
		}
	}
	return true
}

func (c v1) freezerState(path string) string {
	b, err := os.ReadFile(filepath.Join(c.dir("freezer", path), "freezer.state"))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

func (c v1) Freeze(path string) error {
	if err := writeFile(filepath.Join(c.dir("freezer", path), "freezer.state"), "FROZEN"); err != nil {
		return err
	}
	if !waitFor(5*time.Second, func() bool { return c.freezerState(path) == "FROZEN" }) {
		return fmt.Errorf("cgroups: %s did not freeze", path)
	}
	return nil
}

func (c v1) Thaw(path string) error {
	return writeFile(filepath.Join(c.dir("freezer", path), "freezer.state"), "THAWED")
}
