package gvisor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/airlockhq/airlock/internal/wsarchive"
)

// A checkpoint keeps the disk it was taken on.
//
// A sandbox's /workspace and /tmp are host directories on its own disk,
// served to it by the gofer: not in its memory. A checkpoint (a base
// snapshot) is taken after the image's start_cmd ran, and what that
// program wrote there (a pid file, a socket's directory, a warmed cache,
// files it keeps open) is part of the state the restored processes
// expect: runsc restore walks every file the checkpointed kernel had
// looked up again and fails when one is missing. So Checkpoint archives
// both directories into the checkpoint directory, and a restore fills
// its fresh disk from them instead of seeding the workspace from the
// image.

// Names of the disk archives in a checkpoint directory (top-level files:
// the base snapshot's manifest hashes them with the rest).
const (
	workspaceArchive = "disk-workspace.tar"
	tmpArchive       = "disk-tmp.tar"
)

// saveDisk archives the stopped sandbox's workspace and /tmp (under
// disk) into the checkpoint directory dir; maxBytes bounds their files
// together (0: wsarchive's default; the disk's own size bounds them
// anyway). Sockets, devices and pipes are left out (wsarchive).
func saveDisk(ctx context.Context, disk, dir string, maxBytes int64) error {
	for _, a := range []struct{ src, name string }{
		{filepath.Join(disk, "workspace"), workspaceArchive},
		{filepath.Join(disk, "tmp"), tmpArchive},
	} {
		f, err := os.OpenFile(filepath.Join(dir, a.name), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return fmt.Errorf("gvisor: save the disk: %w", err)
		}
		_, err = wsarchive.Write(ctx, a.src, f, wsarchive.Limits{MaxBytes: maxBytes})
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("gvisor: save the disk's %s: %w", filepath.Base(a.src), err)
		}
	}
	return nil
}

// loadDisk fills a fresh disk's workspace and /tmp from the archives of
// the checkpoint directory from, owned by the sandbox user; false when
// the checkpoint has none (made before checkpoints kept the disk).
func loadDisk(ctx context.Context, from, workspace, tmp string, diskBytes int64) (bool, error) {
	if _, err := os.Stat(filepath.Join(from, workspaceArchive)); errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	lim := wsarchive.Limits{MaxBytes: max(diskBytes, 1<<30)}
	for _, a := range []struct{ name, dst string }{{workspaceArchive, workspace}, {tmpArchive, tmp}} {
		f, err := os.Open(filepath.Join(from, a.name))
		if err != nil {
			return false, fmt.Errorf("gvisor: restore the disk: %w", err)
		}
		_, err = wsarchive.Extract(ctx, f, a.dst, SandboxUID, SandboxUID, lim)
		f.Close()
		if err != nil {
			return false, fmt.Errorf("gvisor: restore the disk's %s: %w", filepath.Base(a.dst), err)
		}
	}
	return true, nil
}
