package microvm

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/airlockhq/airlock/internal/loopdisk"
)

// CheckClean reports anything of this backend's sandboxes still on the
// host: live sandboxes, cgroups, machine directories (chroots, disks,
// sockets, logs), mounts, and processes in its cgroups or running as a
// host uid it handed out (a VMM). Tests call it after every case.
func (b *Backend) CheckClean(ctx context.Context) error {
	var errs []error
	b.mu.Lock()
	for id := range b.live {
		errs = append(errs, fmt.Errorf("sandbox %s not destroyed", id))
	}
	issued := make(map[int]bool, len(b.issued))
	for uid := range b.issued {
		issued[uid] = true
	}
	b.mu.Unlock()
	if cgs, err := b.cgroups.List(b.cfg.CgroupParent); err != nil {
		errs = append(errs, err)
	} else if len(cgs) > 0 {
		errs = append(errs, fmt.Errorf("cgroups left under %s: %v", b.cfg.CgroupParent, cgs))
	}
	if entries, err := os.ReadDir(b.cfg.vmsDir()); err == nil && len(entries) > 0 {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		errs = append(errs, fmt.Errorf("machine directories left: %v", names))
	}
	if m, err := loopdisk.MountsUnder(b.cfg.vmsDir()); err != nil {
		errs = append(errs, err)
	} else if len(m) > 0 {
		errs = append(errs, fmt.Errorf("mounts left: %v", m))
	}
	if pids := b.leftProcesses(issued); len(pids) > 0 {
		errs = append(errs, fmt.Errorf("processes left: %v", pids))
	}
	return errors.Join(errs...)
}

// leftProcesses lists host processes in one of the backend's cgroups or
// running as one of the given host uids.
func (b *Backend) leftProcesses(uids map[int]bool) []string {
	entries, _ := os.ReadDir("/proc")
	marker := "/" + strings.Trim(b.cfg.CgroupParent, "/") + "/"
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

// RemoveAll removes the backend's own host state once no sandbox is
// left: the parent cgroup, the disk templates, the machines directory.
// Tests call it; a node keeps them.
func (b *Backend) RemoveAll() error {
	return errors.Join(b.cgroups.Remove(b.cfg.CgroupParent), os.RemoveAll(b.cfg.templatesDir()), os.Remove(b.cfg.vmsDir()))
}
