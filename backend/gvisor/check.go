package gvisor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// CheckClean reports anything of this backend's sandboxes still on the
// host: live sandboxes, runsc containers, cgroups, run directories,
// mounts and processes. Tests call it after every case.
func (b *Backend) CheckClean(ctx context.Context) error {
	var errs []error
	b.mu.Lock()
	for id := range b.live {
		errs = append(errs, fmt.Errorf("sandbox %s not destroyed", id))
	}
	b.mu.Unlock()
	if ids, err := b.listContainers(ctx); err != nil {
		errs = append(errs, err)
	} else if len(ids) > 0 {
		errs = append(errs, fmt.Errorf("runsc containers left: %v", ids))
	}
	if cgs, err := b.cgroups.List(b.cfg.CgroupParent); err != nil {
		errs = append(errs, err)
	} else if len(cgs) > 0 {
		errs = append(errs, fmt.Errorf("cgroups left under %s: %v", b.cfg.CgroupParent, cgs))
	}
	if entries, err := os.ReadDir(b.cfg.sandboxesDir()); err == nil && len(entries) > 0 {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		errs = append(errs, fmt.Errorf("run directories left: %v", names))
	}
	if m, err := mountsUnder(b.cfg.sandboxesDir()); err != nil {
		errs = append(errs, err)
	} else if len(m) > 0 {
		errs = append(errs, fmt.Errorf("mounts left: %v", m))
	}
	if pids := processesMentioning(b.cfg.StateDir); len(pids) > 0 {
		errs = append(errs, fmt.Errorf("processes left: %v", pids))
	}
	return errors.Join(errs...)
}

// processesMentioning lists PIDs whose command line contains s (runsc
// processes carry --root <state>/runsc).
func processesMentioning(s string) []string {
	entries, _ := os.ReadDir("/proc")
	var out []string
	for _, e := range entries {
		if e.Name()[0] < '0' || e.Name()[0] > '9' {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		if strings.Contains(string(b), s) {
			out = append(out, e.Name())
		}
	}
	return out
}

// RemoveAll removes the backend's own host state once no sandbox is left:
// the parent cgroup and runsc's shared mounts (its network namespace
// handle). Tests call it; a node keeps them.
func (b *Backend) RemoveAll() error {
	return errors.Join(b.cgroups.Remove(b.cfg.CgroupParent), unmountAll(b.cfg.StateDir))
}
