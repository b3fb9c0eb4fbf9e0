package microvm

import (
	"github.com/airlockhq/airlock/internal/guestabi"

	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"sync"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/backend/microvm/guest"
	"github.com/airlockhq/airlock/internal/loopdisk"
)

var _ airlock.Snapshotter = (*Backend)(nil)

// Files of a checkpoint directory.
const (
	checkpointState = "state"        // the VMM's saved machine (memory and devices)
	checkpointDisk  = "scratch.ext4" // the scratch disk as it was then
	checkpointMeta  = "machine.json" // what the machine was: checkpointInfo
)

// checkpointInfo says what a checkpoint is of: a restore must give the
// machine the same devices and sizes.
type checkpointInfo struct {
	Guest     string  `json:"guest"` // the guest artefacts' hash
	VCPUs     int     `json:"vcpus"`
	MemoryMiB int64   `json:"memory_mib"`
	DiskBytes int64   `json:"disk_bytes"`
	Pids      int64   `json:"pids"`
	CPUs      float64 `json:"cpus"`
	Version   string  `json:"version"`
}

type checkpoint struct {
	dir  string
	info checkpointInfo
}

func infoOf(g *guestabi.Guest, l airlock.Limits, version string) checkpointInfo {
	return checkpointInfo{Guest: g.Hash, VCPUs: vcpusOf(l), MemoryMiB: l.MemoryBytes >> 20, DiskBytes: l.DiskBytes, Pids: l.Pids, CPUs: l.CPUs, Version: version}
}

func vcpusOf(l airlock.Limits) int {
	return max(int(math.Ceil(l.CPUs)), 1)
}

// Checkpoint saves a running sandbox of this backend into dir (which
// must not exist): the VMM's state, migrated to a file with the vCPUs
// stopped, and a copy of the scratch disk; then the sandbox is
// destroyed. Its network, if it had one, is not part of it: only a
// sandbox without one can be checkpointed.
func (b *Backend) Checkpoint(ctx context.Context, sb airlock.Sandbox, dir string) error {
	s, ok := sb.(*Sandbox)
	if !ok || s.b != b || s.machine == nil {
		return errors.New("microvm: checkpoint of a sandbox this backend did not create")
	}
	defer s.Destroy(context.WithoutCancel(ctx))
	if s.networked {
		return errors.New("microvm: a sandbox with a network cannot be checkpointed")
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		return fmt.Errorf("microvm: checkpoint: %w", err)
	}
	err := func() error {
		f, err := os.OpenFile(filepath.Join(dir, checkpointState), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
		if err != nil {
			return err
		}
		if err := s.machine.Snapshot(ctx, f); err != nil {
			f.Close()
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
		// QEMU has flushed the disk when the migration completed; the
		// vCPUs stay stopped, so nothing writes it now.
		if err := loopdisk.CopySparse(filepath.Join(s.dir, "scratch.ext4"), filepath.Join(dir, checkpointDisk)); err != nil {
			return err
		}
		meta, _ := json.MarshalIndent(s.info, "", "  ")
		return os.WriteFile(filepath.Join(dir, checkpointMeta), meta, 0o600)
	}()
	if err != nil {
		os.RemoveAll(dir)
		return fmt.Errorf("microvm: checkpoint %s: %w", s.id, err)
	}
	return nil
}

// Restore starts a sandbox from a checkpoint of a sandbox with the same
// image and limits: a new VMM reads the saved machine, with a copy of
// the saved scratch disk (the guest's kernel holds that file system's
// state in the saved memory, so the disk cannot be a fresh one: the
// workspace is the saved sandbox's, empty for a base snapshot); its
// agent and programs go on where they were, under a new host uid,
// cgroup and machine directory.
// Every restored machine gets fresh entropy from the host (virtio-rng)
// and a new VM generation ID, on which the guest kernel reseeds its
// random generator.
func (b *Backend) Restore(ctx context.Context, spec airlock.SandboxSpec, dir string) (airlock.Sandbox, error) {
	meta, err := os.ReadFile(filepath.Join(dir, checkpointMeta))
	if err != nil {
		return nil, fmt.Errorf("microvm: restore: %w", err)
	}
	cp := &checkpoint{dir: dir}
	if err := json.Unmarshal(meta, &cp.info); err != nil {
		return nil, fmt.Errorf("microvm: restore: %s: %w", checkpointMeta, err)
	}
	if spec.Network != nil {
		return nil, errors.New("microvm: a checkpoint restores without a network")
	}
	if spec.Image == nil {
		return nil, fmt.Errorf("microvm: sandbox %s has no image", spec.ID)
	}
	g, err := b.guest(ctx, spec.Image)
	if err != nil {
		return nil, err
	}
	if want := infoOf(g, spec.Limits, b.SnapshotVersion()); cp.info != want {
		return nil, fmt.Errorf("microvm: restore: the checkpoint is of %+v, not %+v", cp.info, want)
	}
	return b.create(ctx, spec, cp)
}

// reconnect makes the restored guest unique and speaks to its agent: the
// guest's kernel is reseeded from the host's entropy (its reseeder, on
// a port of its own) before anything in the guest is asked to run; then
// the agent, which said its hello before the checkpoint, answers a
// health request over the connection the driver made before the guest
// ran again. The warm interpreters reseed themselves from the kernel
// when they fork a program.
func (s *Sandbox) reconnect(ctx context.Context, from *checkpoint) error {
	conn := s.machine.AgentConn()
	if conn == nil {
		return errors.New("the VMM made no connection to the agent's port")
	}
	s.useAgent(conn)
	seed := make([]byte, guest.SeedBytes)
	if _, err := rand.Read(seed); err != nil {
		return err
	}
	if err := s.machine.Reseed(ctx, seed); err != nil {
		return err
	}
	_, err := s.agent.Health(ctx)
	return err
}

var (
	versionOnce sync.Once
	version     string
)

// SnapshotVersion names what a checkpoint can be restored by: the QEMU
// binary (its hash) and the guest recipe; a checkpoint's own file says
// which guest artefacts it holds.
func (b *Backend) SnapshotVersion() string {
	versionOnce.Do(func() {
		version = "qemu-sha256:unknown"
		p, err := exec.LookPath("qemu-system-x86_64")
		if err != nil {
			return
		}
		f, err := os.Open(p)
		if err != nil {
			return
		}
		defer f.Close()
		h := sha256.New()
		if _, err := io.Copy(h, f); err != nil {
			return
		}
		version = "qemu-sha256:" + hex.EncodeToString(h.Sum(nil)) + " guest-recipe:" + guestabi.RecipeVersion
	})
	return version
}
