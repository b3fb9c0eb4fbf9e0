package namespaces

import (
	"context"
	"errors"
	"os"

	"github.com/airlockhq/airlock/internal/leftovers"
	"github.com/airlockhq/airlock/internal/loopdisk"
)

// CheckClean reports anything of this backend's sandboxes still on the
// host: live sandboxes, cgroups, run directories, mounts, and processes
// in its cgroups or running as a host uid it handed out. Tests call it
// after every case.
func (b *Backend) CheckClean(ctx context.Context) error {
	b.disks.wait() // run directories of destroyed sandboxes being deleted
	b.mu.Lock()
	c := leftovers.Check{
		Cgroups: b.cgroups, CgroupParent: b.cfg.CgroupParent,
		Dir: b.cfg.sandboxesDir(), DirWhat: "run directories",
		UIDs: make(map[int]bool, len(b.issued)),
	}
	for id := range b.live {
		c.Live = append(c.Live, id)
	}
	for uid := range b.issued {
		c.UIDs[uid] = true
	}
	b.mu.Unlock()
	return c.Err()
}

// RemoveAll removes the backend's own host state once no sandbox is left:
// the sandboxes and disks kept ready, the parent cgroup, the disk
// templates and the bind mount of the state directory. Tests call
// it; a node keeps them.
func (b *Backend) RemoveAll() error {
	return errors.Join(b.Close(), b.cgroups.Remove(b.cfg.CgroupParent), os.RemoveAll(b.cfg.disksDir()),
		os.RemoveAll(b.cfg.readyDir()), os.RemoveAll(b.cfg.templatesDir()), loopdisk.UnmountAll(b.cfg.StateDir))
}
