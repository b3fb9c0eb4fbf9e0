package volume

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/loopdisk"
)

// Attach claims the volumes for the session and mounts those not
// mounted on this node yet; it returns what the sandbox is to bind. On
// error nothing is claimed: volume-not-found (404), volume-busy (409, a
// second writer, or a writer while a snapshot is being taken, or any
// mount while the volume is being restored), volume-elsewhere (409, held
// by another node).
func (s *Service) Attach(ctx context.Context, tenantID, sessionID string, reqs []airlock.VolumeMount) ([]airlock.SandboxVolume, error) {
	if len(reqs) == 0 {
		return nil, nil
	}
	now := s.cfg.Now().UTC()
	claims := make([]airlock.VolumeClaim, 0, len(reqs))
	for _, r := range reqs {
		v, err := s.cfg.Store.Volume(ctx, tenantID, r.Name)
		if err != nil {
			return nil, err
		}
		if v.Node != s.cfg.Node {
			return nil, airlock.Problem(airlock.ECONFLICT, "volume-elsewhere", "volume %s is held by node %s; a session mounting it runs there", r.Name, v.Node)
		}
		claims = append(claims, airlock.VolumeClaim{TenantID: tenantID, Volume: r.Name, SessionID: sessionID, Path: r.Path,
			ReadOnly: r.ReadOnly, Node: s.cfg.Node, MountedAt: now})
	}
	if err := s.cfg.Store.ClaimVolumes(ctx, claims); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	// A volume being restored takes no mount, one being snapshotted no
	// writer (snapshot.go): checked under s.mu after the claim, so a
	// snapshot starting at the same time sees the claim instead.
	for _, r := range reqs {
		if b := s.busy[key{tenantID, r.Name}]; b != nil && (b.restoring || !r.ReadOnly) {
			if err := s.cfg.Store.ReleaseVolumes(context.WithoutCancel(ctx), sessionID); err != nil {
				s.cfg.Logger.Error("release the volumes of a session refused a busy volume", "session", sessionID, "err", err)
			}
			return nil, busyProblem(r.Name, b)
		}
	}
	out := make([]airlock.SandboxVolume, 0, len(reqs))
	for _, r := range reqs {
		k := key{tenantID, r.Name}
		s.hold(k, sessionID)
		if err := s.mount(ctx, k); err != nil {
			s.release(sessionID)
			if rerr := s.cfg.Store.ReleaseVolumes(context.WithoutCancel(ctx), sessionID); rerr != nil {
				s.cfg.Logger.Error("release the volumes of a session whose mount failed", "session", sessionID, "err", rerr)
			}
			return nil, &airlock.Error{Code: airlock.EUNAVAILABLE, Type: "volume-failed", Message: "volume " + r.Name + " could not be mounted", Err: err}
		}
		out = append(out, airlock.SandboxVolume{HostDir: s.mountDir(k), Path: r.Path, ReadOnly: r.ReadOnly})
	}
	return out, nil
}

// Detach releases the session's claims and unmounts the volumes no other
// session of the node holds. Call it once the session's sandbox is gone.
// A session without volumes costs nothing.
func (s *Service) Detach(ctx context.Context, sessionID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.bySession[sessionID]; !ok {
		return nil
	}
	err := s.cfg.Store.ReleaseVolumes(context.WithoutCancel(ctx), sessionID)
	return errors.Join(err, s.release(sessionID))
}

// Claims returns what each session of this node has mounted, as the
// store says (for the sessions a restarted server takes back).
func (s *Service) Claims(ctx context.Context) (map[string][]airlock.VolumeMount, error) {
	cs, err := s.cfg.Store.AllVolumeClaims(ctx, s.cfg.Node)
	if err != nil {
		return nil, err
	}
	out := map[string][]airlock.VolumeMount{}
	for _, c := range cs {
		out[c.SessionID] = append(out[c.SessionID], airlock.VolumeMount{Name: c.Volume, Path: c.Path, ReadOnly: c.ReadOnly})
	}
	return out, nil
}

// Recover takes back the claims of this node's sessions that live on
// (live says which) and makes sure their volumes are mounted; it
// releases the claims of sessions that are gone, and unmounts every
// volume no claim holds. Call it once at start, after the sessions were
// recovered.
func (s *Service) Recover(ctx context.Context, live func(sessionID string) bool) error {
	cs, err := s.cfg.Store.AllVolumeClaims(ctx, s.cfg.Node)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var errs []error
	gone := map[string]bool{}
	for _, c := range cs {
		if !live(c.SessionID) {
			gone[c.SessionID] = true
			continue
		}
		k := key{c.TenantID, c.Volume}
		s.hold(k, c.SessionID)
		if err := s.mount(ctx, k); err != nil {
			errs = append(errs, fmt.Errorf("volume %s of session %s: %w", c.Volume, c.SessionID, err))
		}
	}
	for id := range gone {
		if err := s.cfg.Store.ReleaseVolumes(ctx, id); err != nil {
			errs = append(errs, err)
		}
	}
	if len(gone) > 0 {
		s.cfg.Logger.Info("volume claims of sessions that ended with the earlier run were released", "sessions", len(gone))
	}
	// Mounts nothing holds: left by sessions that are gone.
	mounts, err := loopdisk.MountsUnder(filepath.Join(s.cfg.Dir, "mnt"))
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	for _, m := range mounts {
		rel, err := filepath.Rel(filepath.Join(s.cfg.Dir, "mnt"), m)
		if err != nil {
			continue
		}
		tenant, name, ok := strings.Cut(rel, string(filepath.Separator))
		if !ok {
			continue
		}
		k := key{tenant, name}
		if len(s.held[k]) == 0 {
			if err := s.unmount(k); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// hold records that the session holds the volume (s.mu held).
func (s *Service) hold(k key, sessionID string) {
	if s.held[k] == nil {
		s.held[k] = map[string]bool{}
	}
	s.held[k][sessionID] = true
	s.bySession[sessionID] = append(s.bySession[sessionID], k)
}

// release forgets the session's holds and unmounts what nobody holds
// any more (s.mu held).
func (s *Service) release(sessionID string) error {
	var errs []error
	for _, k := range s.bySession[sessionID] {
		delete(s.held[k], sessionID)
		if len(s.held[k]) == 0 {
			delete(s.held, k)
			if err := s.unmount(k); err != nil {
				errs = append(errs, err)
			}
		}
	}
	delete(s.bySession, sessionID)
	return errors.Join(errs...)
}

// mount mounts the volume's image at its host directory unless it is
// mounted there (s.mu held). An image lost to a crash between its
// record and its formatting is made again, empty.
func (s *Service) mount(ctx context.Context, k key) error {
	dir := s.mountDir(k)
	if ms, err := loopdisk.MountsUnder(dir); err != nil {
		return err
	} else if len(ms) > 0 {
		return nil
	}
	img := s.image(k)
	if _, err := os.Stat(img); errors.Is(err, os.ErrNotExist) {
		v, verr := s.cfg.Store.Volume(ctx, k.tenant, k.name)
		if verr != nil {
			return verr
		}
		s.cfg.Logger.Warn("a volume's disk was missing and is made again, empty", "volume", k.name, "tenant", k.tenant)
		if err := s.format(ctx, k, v.SizeMiB); err != nil {
			return err
		}
	}
	// A mount still attached elsewhere (lazily unmounted, say) must not
	// be mounted a second time through another loop device.
	if busy, err := loopdisk.Attached(img); err != nil {
		return err
	} else if busy {
		return fmt.Errorf("volume %s: its disk is still attached to a loop device from an earlier mount", k.name)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	// The host directory is root's; the sandbox reaches the volume's
	// root (owned by the sandbox user) through the backend's bind.
	return loopdisk.Mount(ctx, dir, img)
}

// unmount unmounts the volume's host directory if mounted and removes
// it (s.mu held).
func (s *Service) unmount(k key) error {
	dir := s.mountDir(k)
	if err := loopdisk.UnmountAll(dir); err != nil {
		return fmt.Errorf("volume %s: %w", k.name, err)
	}
	if err := os.Remove(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("volume %s: %w", k.name, err)
	}
	return nil
}
