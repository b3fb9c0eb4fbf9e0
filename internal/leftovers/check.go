package leftovers

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/airlockhq/airlock/internal/cgroups"
	"github.com/airlockhq/airlock/internal/loopdisk"
)

// Check is what a clean host has none of for one backend.
type Check struct {
	// Live are the sandboxes the backend has not destroyed.
	Live []string
	// Cgroups and CgroupParent: no cgroup may be left below the parent,
	// nor a process in one.
	Cgroups      cgroups.Manager
	CgroupParent string
	// Dir holds a directory per sandbox (DirWhat names them in the
	// error: "run directories"); none may be left, nor a mount below.
	Dir     string
	DirWhat string
	// UIDs are the host uids the backend handed out; no process may run
	// as one.
	UIDs map[int]bool
}

// Err reports everything left, nil if nothing is.
func (c Check) Err() error {
	var errs []error
	sort.Strings(c.Live)
	for _, id := range c.Live {
		errs = append(errs, fmt.Errorf("sandbox %s not destroyed", id))
	}
	if cgs, err := c.Cgroups.List(c.CgroupParent); err != nil {
		errs = append(errs, err)
	} else if len(cgs) > 0 {
		errs = append(errs, fmt.Errorf("cgroups left under %s: %v", c.CgroupParent, cgs))
	}
	if entries, err := os.ReadDir(c.Dir); err == nil && len(entries) > 0 {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		errs = append(errs, fmt.Errorf("%s left: %v", c.DirWhat, names))
	}
	if m, err := loopdisk.MountsUnder(c.Dir); err != nil {
		errs = append(errs, err)
	} else if len(m) > 0 {
		errs = append(errs, fmt.Errorf("mounts left: %v", m))
	}
	if pids := Processes(c.CgroupParent, c.UIDs); len(pids) > 0 {
		errs = append(errs, fmt.Errorf("processes left: %v", pids))
	}
	return errors.Join(errs...)
}

// Processes lists host processes in a cgroup below cgroupParent or
// running as one of uids.
func Processes(cgroupParent string, uids map[int]bool) []string {
	entries, _ := os.ReadDir("/proc")
	marker := "/" + strings.Trim(cgroupParent, "/") + "/"
	var out []string
	for _, e := range entries {
		if e.Name()[0] < '0' || e.Name()[0] > '9' {
			continue
		}
		if cg, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cgroup")); err == nil && strings.Contains(string(cg), marker) {
			out = append(out, e.Name())
			continue
		}
		if uid, ok := processUID(e.Name()); ok && uids[uid] {
			out = append(out, e.Name())
		}
	}
	return out
}

// processUID returns the real uid of a process.
func processUID(pid string) (int, bool) {
	f, err := os.Open(filepath.Join("/proc", pid, "status"))
	if err != nil {
		return 0, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "Uid:"); ok {
			f := strings.Fields(rest)
			if len(f) == 0 {
				return 0, false
			}
			uid, err := strconv.Atoi(f[0])
			return uid, err == nil
		}
	}
	return 0, false
}
