package gvisor

import (
	"context"

	"github.com/airlockhq/airlock/internal/loopdisk"
)

// mountDisk gives a sandbox its writable storage: a sparse file on the
// host holding a fresh ext4 file system, mounted through a loop device at
// dir (see package loopdisk). The file system is a copy of a template
// formatted once per size, which costs a fraction of running mkfs per
// sandbox. The host kernel enforces its size and inode count.
func (b *Backend) mountDisk(ctx context.Context, dir, image string, sizeBytes int64) error {
	if err := b.disks.Create(ctx, image, sizeBytes); err != nil {
		return err
	}
	return loopdisk.Mount(ctx, dir, image)
}

// unmountAll unmounts every mount at or below dir, deepest first.
func unmountAll(dir string) error { return loopdisk.UnmountAll(dir) }

// mountsUnder lists mount points at or below dir, in mount order.
func mountsUnder(dir string) ([]string, error) { return loopdisk.MountsUnder(dir) }
