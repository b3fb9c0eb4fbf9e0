package gvisor

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"

	"github.com/airlockhq/airlock"
)

var _ airlock.Snapshotter = (*Backend)(nil)

// Checkpoint saves the state of a running sandbox of this backend into dir
// (`runsc checkpoint`), which ends the sandbox; it is then destroyed. dir
// must not exist yet.
func (b *Backend) Checkpoint(ctx context.Context, sb airlock.Sandbox, dir string) error {
	s, ok := sb.(*Sandbox)
	if !ok || s.b != b {
		return fmt.Errorf("gvisor: checkpoint of a sandbox this backend did not create")
	}
	defer s.Destroy(context.WithoutCancel(ctx))
	if err := os.Mkdir(dir, 0o700); err != nil {
		return fmt.Errorf("gvisor: checkpoint: %w", err)
	}
	// Zero pages need not be saved; restore maps them as zero again.
	if _, err := b.runsc(ctx, "checkpoint", "--exclude-committed-zero-pages", "--image-path", dir, s.id); err != nil {
		os.RemoveAll(dir)
		return fmt.Errorf("gvisor: checkpoint %s: %w", s.id, err)
	}
	// The sandbox is stopped: its workspace and /tmp are as the
	// checkpoint saw them (see diskstate.go).
	if err := saveDisk(ctx, filepath.Join(s.dir, "disk"), dir, 0); err != nil {
		os.RemoveAll(dir)
		return err
	}
	return nil
}

// Restore starts a sandbox from a checkpoint made by Checkpoint of a
// sandbox with the same image and limits. The restored sandbox has a
// fresh disk of its own whose workspace and /tmp hold what the
// checkpointed sandbox's held; its agent and processes continue where
// the checkpoint left them.
func (b *Backend) Restore(ctx context.Context, spec airlock.SandboxSpec, dir string) (airlock.Sandbox, error) {
	if _, err := os.Stat(dir); err != nil {
		return nil, fmt.Errorf("gvisor: restore: %w", err)
	}
	return b.create(ctx, spec, dir)
}

var (
	versionOnce sync.Once
	version     string
)

// SnapshotVersion is the SHA-256 of the runsc binary: runsc builds from the
// module proxy report no version of their own, and a checkpoint is only
// sure to restore under the runsc that made it.
func (b *Backend) SnapshotVersion() string {
	versionOnce.Do(func() {
		f, err := os.Open(b.cfg.Runsc)
		if err != nil {
			version = "unknown"
			return
		}
		defer f.Close()
		h := sha256.New()
		if _, err := io.Copy(h, f); err != nil {
			version = "unknown"
			return
		}
		version = "runsc-sha256:" + hex.EncodeToString(h.Sum(nil))
	})
	return version
}
