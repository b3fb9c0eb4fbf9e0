package microvm

import (
	"context"
	"errors"
	"os"

	"github.com/airlockhq/airlock/internal/leftovers"
)

// CheckClean reports anything of this backend's sandboxes still on the
// host: live sandboxes, cgroups, machine directories (chroots, disks,
// sockets, logs), mounts, and processes in its cgroups or running as a
// host uid it handed out (a VMM). Tests call it after every case.
func (b *Backend) CheckClean(ctx context.Context) error {
	b.mu.Lock()
	c := leftovers.Check{
		Cgroups: b.cgroups, CgroupParent: b.cfg.CgroupParent,
		Dir: b.cfg.vmsDir(), DirWhat: "machine directories",
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

// RemoveAll removes the backend's own host state once no sandbox is
// left: the parent cgroup, the disk templates, the machines directory.
// Tests call it; a node keeps them.
func (b *Backend) RemoveAll() error {
	return errors.Join(b.cgroups.Remove(b.cfg.CgroupParent), os.RemoveAll(b.cfg.templatesDir()), os.Remove(b.cfg.vmsDir()))
}
