package gvisor

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/loopdisk"
)

var _ airlock.Pauser = (*Backend)(nil)

// A paused sandbox is a directory on this node: checkpoint/ (runsc
// checkpoint: the gVisor kernel, its processes and memory) and disk.img
// (the sandbox's own disk: its workspace and /tmp, which the checkpoint
// refers to but does not hold). Resume restores the checkpoint over that
// same disk, so nothing written before the pause is lost, however often
// it is paused. The directory is the caller's: it lives outside the
// sandboxes directory, so the reconciler leaves it alone.
const (
	pausedCheckpoint = "checkpoint"
	pausedDisk       = "disk.img"
)

// Pause checkpoints sb into dir and ends it; its disk image is kept in dir
// (hard linked before the sandbox's directory is removed, so it is never
// copied). A sandbox with a network cannot be paused (it could not be
// restored: see create).
func (b *Backend) Pause(ctx context.Context, sb airlock.Sandbox, dir string) error {
	s, ok := sb.(*Sandbox)
	if !ok || s.b != b {
		return fmt.Errorf("gvisor: pause of a sandbox this backend did not create (or one with a network)")
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		return fmt.Errorf("gvisor: pause: %w", err)
	}
	fail := func(err error) error {
		os.RemoveAll(dir)
		return err
	}
	if _, err := b.runsc(ctx, "checkpoint", "--exclude-committed-zero-pages", "--image-path", filepath.Join(dir, pausedCheckpoint), s.id); err != nil {
		// The sandbox may still run: it is the caller's to keep or end.
		return fail(fmt.Errorf("gvisor: pause %s: %w", s.id, err))
	}
	if err := os.Link(filepath.Join(s.dir, "disk.img"), filepath.Join(dir, pausedDisk)); err != nil {
		s.Destroy(context.WithoutCancel(ctx))
		return fail(fmt.Errorf("gvisor: pause %s: keep its disk: %w", s.id, err))
	}
	// Destroy unmounts the disk, which writes what the kernel still held
	// of it into the image (the same file as the link kept).
	if err := s.Destroy(context.WithoutCancel(ctx)); err != nil {
		return fail(fmt.Errorf("gvisor: pause %s: %w", s.id, err))
	}
	return nil
}

// Resume restores a sandbox Pause saved in dir, as spec.ID.
func (b *Backend) Resume(ctx context.Context, spec airlock.SandboxSpec, dir string) (airlock.Sandbox, error) {
	for _, n := range []string{pausedCheckpoint, pausedDisk} {
		if _, err := os.Lstat(filepath.Join(dir, n)); err != nil {
			return nil, fmt.Errorf("gvisor: resume: %w", err)
		}
	}
	if spec.Network != nil {
		return nil, fmt.Errorf("gvisor: resume of sandbox %s: a sandbox with a network is never restored", spec.ID)
	}
	return b.createWith(ctx, spec, filepath.Join(dir, pausedCheckpoint), filepath.Join(dir, pausedDisk))
}

// mountPausedDisk links a paused sandbox's disk image to image and mounts
// it at dir.
func (b *Backend) mountPausedDisk(ctx context.Context, dir, paused, image string) error {
	fi, err := os.Lstat(paused)
	if err != nil || !fi.Mode().IsRegular() {
		return fmt.Errorf("gvisor: resume: the paused disk %s is missing or not a file", paused)
	}
	if err := os.Link(paused, image); err != nil {
		return fmt.Errorf("gvisor: resume: %w", err)
	}
	return loopdisk.Mount(ctx, dir, image)
}

var _ airlock.PauseCopier = (*Backend)(nil)

// CopyPaused makes dst (which must not exist) a second paused sandbox
// with the same state as src: the checkpoint's files are hard linked
// (restores only read them) and the disk is copied, sparse, so each copy
// writes to its own.
func (b *Backend) CopyPaused(ctx context.Context, src, dst string) error {
	if err := os.Mkdir(dst, 0o700); err != nil {
		return fmt.Errorf("gvisor: copy paused: %w", err)
	}
	fail := func(err error) error {
		os.RemoveAll(dst)
		return fmt.Errorf("gvisor: copy paused: %w", err)
	}
	ck := filepath.Join(src, pausedCheckpoint)
	entries, err := os.ReadDir(ck)
	if err != nil {
		return fail(err)
	}
	if err := os.Mkdir(filepath.Join(dst, pausedCheckpoint), 0o700); err != nil {
		return fail(err)
	}
	for _, e := range entries {
		if !e.Type().IsRegular() {
			return fail(fmt.Errorf("checkpoint entry %s is not a file", e.Name()))
		}
		if err := os.Link(filepath.Join(ck, e.Name()), filepath.Join(dst, pausedCheckpoint, e.Name())); err != nil {
			return fail(err)
		}
	}
	if err := loopdisk.CopySparse(filepath.Join(src, pausedDisk), filepath.Join(dst, pausedDisk)); err != nil {
		return fail(err)
	}
	return ctx.Err()
}
