package volume

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

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
	return &Service{cfg: cfg, held: map[key]map[string]bool{}, bySession: map[string][]key{}}, nil
}

func (s *Service) image(k key) string {
	return filepath.Join(s.cfg.Dir, "disks", k.tenant, k.name+".ext4")
}
func (s *Service) mountDir(k key) string {
	return filepath.Join(s.cfg.Dir, "mnt", k.tenant, k.name)
}

// CreateVolume records and formats a volume, if it fits the tenant's
// quota.
func (s *Service) CreateVolume(ctx context.Context, tenant *airlock.Tenant, req airlock.CreateVolumeRequest) (*airlock.Volume, error) {
	if err := req.Validate(); err != nil {
		return nil, err
	}
	maxMiB := int64(-1)
	if s.cfg.QuotaBytes != nil {
		if b := s.cfg.QuotaBytes(tenant.ID); b >= 0 {
			maxMiB = b >> 20
		}
	}
	v := &airlock.Volume{Name: req.Name, TenantID: tenant.ID, SizeMiB: req.SizeMiB, Node: s.cfg.Node,
		CreatedAt: s.cfg.Now().UTC(), Mounts: []airlock.VolumeMountInfo{}}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.cfg.Store.CreateVolume(ctx, v, maxMiB); err != nil {
		return nil, err
	}
	k := key{tenant.ID, req.Name}
	if err := s.format(ctx, k, req.SizeMiB); err != nil {
		if derr := s.cfg.Store.DeleteVolume(context.WithoutCancel(ctx), tenant.ID, req.Name); derr != nil {
			s.cfg.Logger.Error("drop the record of a volume that could not be made", "volume", req.Name, "err", derr)
		}
		return nil, &airlock.Error{Code: airlock.EUNAVAILABLE, Type: "volume-failed", Message: "the volume's disk could not be made", Err: err}
	}
	return v, nil
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
	if err := s.cfg.Store.DeleteVolume(ctx, tenant.ID, name); err != nil {
		return err
	}
	k := key{tenant.ID, name}
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
