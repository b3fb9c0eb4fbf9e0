package volume

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/loopdisk"
)

// Service keeps the volumes of this node. It is safe for concurrent use.
type Service struct {
	cfg Config

	// mu serialises creating, deleting, mounting and unmounting: each
	// is a few file system calls, and one at a time keeps a volume
	// from being formatted, mounted and removed at once.
	mu sync.Mutex
	// held is, by volume, the sessions of this node that have it
	// mounted; bySession the other way round.
	held      map[key]map[string]bool
	bySession map[string][]key
	// busy are the volumes being snapshotted or restored now (snapshot.go).
	busy map[key]*busyState
}

// key names one tenant's volume.
type key struct{ tenant, name string }

var (
	_ airlock.VolumeService = (*Service)(nil)
)

// New returns a Service; call Recover before the node serves.
func New(cfg Config) (*Service, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	for _, d := range []string{cfg.Dir, filepath.Join(cfg.Dir, "disks"), filepath.Join(cfg.Dir, "mnt")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("volume: %w", err)
		}
	}
	return &Service{cfg: cfg, held: map[key]map[string]bool{}, bySession: map[string][]key{}, busy: map[key]*busyState{}}, nil
}

func (s *Service) image(k key) string {
	return filepath.Join(s.cfg.Dir, "disks", k.tenant, k.name+".ext4")
}
func (s *Service) mountDir(k key) string {
	return filepath.Join(s.cfg.Dir, "mnt", k.tenant, k.name)
}

// CreateVolume records and formats a volume, if it fits the tenant's
// quota; one made from a snapshot is filled with the snapshot's files
// before it is answered (and before any session can mount it).
func (s *Service) CreateVolume(ctx context.Context, tenant *airlock.Tenant, req airlock.CreateVolumeRequest) (*airlock.Volume, error) {
	if err := req.Validate(); err != nil {
		return nil, err
	}
	var snap *airlock.VolumeSnapshot
	if req.FromSnapshot != "" {
		if err := s.snapshotsOn(); err != nil {
			return nil, err
		}
		var err error
		if snap, err = s.cfg.Store.VolumeSnapshot(ctx, tenant.ID, req.FromSnapshot); err != nil {
			return nil, err
		}
		if req.SizeMiB == 0 {
			req.SizeMiB = snap.SizeMiB
			if err := req.Validate(); err != nil {
				return nil, err
			}
		}
	}
	v := &airlock.Volume{Name: req.Name, TenantID: tenant.ID, SizeMiB: req.SizeMiB, Node: s.cfg.Node,
		CreatedAt: s.cfg.Now().UTC(), Mounts: []airlock.VolumeMountInfo{}}
	k := key{tenant.ID, req.Name}
	if err := s.create(ctx, v, k, snap != nil); err != nil {
		return nil, err
	}
	if snap == nil {
		return v, nil
	}
	if err := s.restore(ctx, tenant, k, snap); err != nil {
		s.drop(context.WithoutCancel(ctx), k)
		return nil, err
	}
	s.mu.Lock()
	delete(s.busy, k)
	s.mu.Unlock()
	return v, nil
}

// create records and formats a volume; restoring marks it busy (no
// session may mount it, nor anyone delete or snapshot it) until the
// caller has filled it, or dropped it.
func (s *Service) create(ctx context.Context, v *airlock.Volume, k key, restoring bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	maxMiB := int64(-1)
	if s.cfg.QuotaBytes != nil {
		if b := s.cfg.QuotaBytes(k.tenant); b >= 0 {
			maxMiB = b >> 20
		}
	}
	if err := s.cfg.Store.CreateVolume(ctx, v, maxMiB); err != nil {
		return err
	}
	if err := s.format(ctx, k, v.SizeMiB); err != nil {
		if derr := s.cfg.Store.DeleteVolume(context.WithoutCancel(ctx), k.tenant, k.name); derr != nil {
			s.cfg.Logger.Error("drop the record of a volume that could not be made", "volume", k.name, "err", derr)
		}
		return &airlock.Error{Code: airlock.EUNAVAILABLE, Type: "volume-failed", Message: "the volume's disk could not be made", Err: err}
	}
	if restoring {
		s.busy[k] = &busyState{restoring: true}
	}
	return nil
}

// drop removes a volume whose restore failed: its record and its disk
// (still marked busy, so no session has it).
func (s *Service) drop(ctx context.Context, k key) {
	s.mu.Lock()
	defer s.mu.Unlock()
	defer delete(s.busy, k)
	if err := s.cfg.Store.DeleteVolume(ctx, k.tenant, k.name); err != nil {
		s.cfg.Logger.Error("drop the record of a volume whose restore failed", "volume", k.name, "err", err)
	}
	if err := s.unmount(k); err != nil {
		s.cfg.Logger.Error("unmount a volume whose restore failed", "volume", k.name, "err", err)
	}
	if err := os.Remove(s.image(k)); err != nil && !errors.Is(err, os.ErrNotExist) {
		s.cfg.Logger.Error("remove the disk of a volume whose restore failed", "volume", k.name, "err", err)
	}
}

// format makes the volume's image anew (s.mu held): one a crash left
// behind under the name is removed first, the record being ours.
func (s *Service) format(ctx context.Context, k key, sizeMiB int64) error {
	img := s.image(k)
	if err := os.MkdirAll(filepath.Dir(img), 0o700); err != nil {
		return err
	}
	if err := os.Remove(img); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return loopdisk.FormatVolume(ctx, img, sizeMiB<<20, s.cfg.UID, s.cfg.GID)
}

// Volume returns one of the tenant's volumes.
func (s *Service) Volume(ctx context.Context, tenant *airlock.Tenant, name string) (*airlock.Volume, error) {
	if !airlock.ValidVolumeName(name) {
		return nil, volumeNotFound(name)
	}
	return s.cfg.Store.Volume(ctx, tenant.ID, name)
}

// ListVolumes returns the tenant's volumes by name.
func (s *Service) ListVolumes(ctx context.Context, tenant *airlock.Tenant) ([]*airlock.Volume, error) {
	return s.cfg.Store.ListVolumes(ctx, tenant.ID)
}

// DeleteVolume removes a volume no session has mounted, with its data.
func (s *Service) DeleteVolume(ctx context.Context, tenant *airlock.Tenant, name string) error {
	if !airlock.ValidVolumeName(name) {
		return volumeNotFound(name)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	k := key{tenant.ID, name}
	if b := s.busy[k]; b != nil {
		return airlock.Problem(airlock.ECONFLICT, "volume-in-use", "volume %s is %s; delete it once that has ended", name, b.doing()).RetryLater(5 * time.Second)
	}
	if err := s.cfg.Store.DeleteVolume(ctx, tenant.ID, name); err != nil {
		return err
	}
	// Not claimed, so not mounted; a mount a crash left is gone since
	// Recover.
	if err := s.unmount(k); err != nil {
		s.cfg.Logger.Error("unmount a deleted volume", "volume", name, "err", err)
	}
	if err := os.Remove(s.image(k)); err != nil && !errors.Is(err, os.ErrNotExist) {
		s.cfg.Logger.Error("remove a deleted volume's disk", "volume", name, "err", err)
	}
	return nil
}

func volumeNotFound(name string) error {
	return &airlock.Error{Code: airlock.ENOTFOUND, Type: "volume-not-found", Message: "no volume " + name, Err: airlock.ErrNotFound}
}
