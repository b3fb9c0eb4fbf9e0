package volume

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"syscall"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/seal"
	"github.com/airlockhq/airlock/internal/wsarchive"
)

// Volume snapshots.
//
// A snapshot is a consistent copy: it is taken only while no session
// writes the volume (409 volume-busy while a writer holds it), and no
// writer can claim the volume while one is being taken (a writer asking
// then gets 409 volume-busy, to retry). Readers may sit beside it: they
// change nothing. A writer's sandbox keeps what it writes in its own
// caches (gVisor's page cache, the program's buffers) until it syncs or
// ends, so freezing the host file system under a live writer would copy
// a state the writer never had; the one consistent point on the host is
// a volume no one writes.
//
// The files are read from the volume's host mount (wsarchive, through an
// os.Root: nothing of the volume is followed on the host), sealed with
// the tenant's data key as they are read, in package seal's stream format
// (the one workspace snapshots use, under a context of its own:
// volumeSnapshotAAD), and stored in the node's blob store. A restore
// checks the stored size, every chunk's authentication and the hash of
// the whole blob; a blob that fails is refused (snapshot-damaged) and the
// volume is not made.

// busyState is what is being done to a volume besides its sessions'
// mounts (s.mu guards it).
type busyState struct {
	snapshots int  // snapshots being taken: writers are refused
	restoring bool // being filled from a snapshot: every mount is refused
}

func (b *busyState) doing() string {
	if b.restoring {
		return "being restored from a snapshot"
	}
	return "being snapshotted"
}

// volumeSnapshotAAD binds a sealed stream to its tenant and snapshot: a
// blob moved to another snapshot, tenant or kind (a workspace snapshot's
// context differs) does not open.
func volumeSnapshotAAD(tenantID, id string) []byte {
	return []byte("airlock-volume-snapshot-v1\x00" + tenantID + "\x00" + id)
}

func (s *Service) snapshotsOn() error {
	if s.cfg.Snapshots.Keys == nil {
		return airlock.Problem(airlock.EUNAVAILABLE, "keep-unavailable", "snapshots are not configured on this node (it needs a master key)")
	}
	return nil
}

func snapshotQuota(used, quota int64) error {
	return airlock.Problem(airlock.ERATELIMITED, "snapshot-quota",
		"the tenant's snapshots hold %d bytes of its %d; delete some (DELETE /v1/snapshots/{id} or DELETE /v1/volumes/{name}/snapshots/{id}) before taking more", used, quota)
}

func damaged(id, why string) error {
	return airlock.Problem(airlock.EUNPROCESSABLE, "snapshot-damaged",
		"snapshot %s failed its integrity check and was not restored (%s); nothing was made from it", id, why)
}

// archiveLimits bounds the archive of a volume of sizeMiB.
func archiveLimits(sizeMiB int64) wsarchive.Limits {
	return wsarchive.Limits{MaxBytes: max(sizeMiB<<20, 16<<20)}
}

// CreateVolumeSnapshot seals the volume's files into the blob store.
func (s *Service) CreateVolumeSnapshot(ctx context.Context, tenant *airlock.Tenant, name string, req airlock.CreateVolumeSnapshotRequest) (*airlock.VolumeSnapshot, error) {
	if err := s.snapshotsOn(); err != nil {
		return nil, err
	}
	if err := req.Validate(); err != nil {
		return nil, err
	}
	if !airlock.ValidVolumeName(name) {
		return nil, volumeNotFound(name)
	}
	v, err := s.cfg.Store.Volume(ctx, tenant.ID, name)
	if err != nil {
		return nil, err
	}
	if v.Node != s.cfg.Node {
		return nil, airlock.Problem(airlock.ECONFLICT, "volume-elsewhere", "volume %s is held by node %s; take its snapshot there", name, v.Node)
	}
	sc := s.cfg.Snapshots
	used, err := sc.Used(ctx, tenant.ID)
	if err != nil {
		return nil, err
	}
	if used >= sc.QuotaBytes {
		return nil, snapshotQuota(used, sc.QuotaBytes)
	}
	keyID, dek, err := sc.Keys.DataKey(ctx, tenant.ID)
	if err != nil {
		return nil, err
	}
	snap := &airlock.VolumeSnapshot{ID: airlock.NewID(), TenantID: tenant.ID, Volume: name, Name: req.Name,
		SizeMiB: v.SizeMiB, Node: s.cfg.Node, KeyID: keyID}
	snap.BlobKey = airlock.VolumeSnapshotBlobKey(tenant.ID, snap.ID)
	k := key{tenant.ID, name}
	dir, done, err := s.holdForSnapshot(ctx, k, "snapshot:"+snap.ID)
	if err != nil {
		return nil, err
	}
	defer done()

	pr, pw := io.Pipe()
	var st wsarchive.Stats
	werrc := make(chan error, 1)
	go func() {
		sw, err := seal.NewWriter(pw, dek, keyID, volumeSnapshotAAD(tenant.ID, snap.ID))
		if err == nil {
			st, err = wsarchive.Write(ctx, dir, sw, archiveLimits(v.SizeMiB))
			if err == nil {
				err = sw.Close()
			}
		}
		pw.CloseWithError(err)
		werrc <- err
	}()
	h := sha256.New()
	q := &quotaReader{r: io.TeeReader(pr, h), left: sc.QuotaBytes - used}
	n, err := sc.Blobs.Put(ctx, snap.BlobKey, q)
	pr.CloseWithError(errors.New("stopped"))
	if werr := <-werrc; err == nil {
		err = werr
	}
	if err != nil {
		sc.Blobs.Delete(context.WithoutCancel(ctx), snap.BlobKey)
		if q.over {
			return nil, snapshotQuota(used+q.read, sc.QuotaBytes)
		}
		return nil, fmt.Errorf("snapshot of volume %s: %w", name, err)
	}
	snap.Bytes, snap.SHA256, snap.Entries = n, hex.EncodeToString(h.Sum(nil)), st.Entries
	snap.CreatedAt = s.cfg.Now().UTC()
	if err := s.cfg.Store.CreateVolumeSnapshot(ctx, snap); err != nil {
		sc.Blobs.Delete(context.WithoutCancel(ctx), snap.BlobKey)
		return nil, err
	}
	if st.Skipped > 0 {
		s.cfg.Logger.Info("volume snapshot left out entries that are not kept (sockets, devices, links out of the volume)", "snapshot", snap.ID, "skipped", st.Skipped)
	}
	return snap, nil
}

// holdForSnapshot mounts the volume for a snapshot under holder and
// keeps writers off it until done is called; 409 volume-busy if a
// session writes it now. It returns the host directory to read.
func (s *Service) holdForSnapshot(ctx context.Context, k key, holder string) (string, func(), error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if b := s.busy[k]; b != nil && b.restoring {
		return "", nil, busyProblem(k.name, b)
	}
	// The claims are read under s.mu: a writer whose claim is recorded
	// after this has its Attach find the volume busy (Attach checks under
	// s.mu after claiming).
	v, err := s.cfg.Store.Volume(ctx, k.tenant, k.name)
	if err != nil {
		return "", nil, err
	}
	for _, m := range v.Mounts {
		if !m.ReadOnly {
			return "", nil, airlock.Problem(airlock.ECONFLICT, "volume-busy",
				"volume %s is mounted read-write by session %s; a snapshot is taken only while no session writes the volume: end that session (or remount it read-only) first", k.name, m.SessionID).With("session_id", m.SessionID)
		}
	}
	s.hold(k, holder)
	if err := s.mount(ctx, k); err != nil {
		s.release(holder)
		return "", nil, &airlock.Error{Code: airlock.EUNAVAILABLE, Type: "volume-failed", Message: "volume " + k.name + " could not be mounted", Err: err}
	}
	if s.busy[k] == nil {
		s.busy[k] = &busyState{}
	}
	s.busy[k].snapshots++
	return s.mountDir(k), func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if b := s.busy[k]; b != nil {
			if b.snapshots--; b.snapshots <= 0 && !b.restoring {
				delete(s.busy, k)
			}
		}
		if err := s.release(holder); err != nil {
			s.cfg.Logger.Error("unmount a volume after its snapshot", "volume", k.name, "err", err)
		}
	}, nil
}

// busyProblem refuses a mount of a volume being snapshotted (writers)
// or restored (everyone).
func busyProblem(name string, b *busyState) error {
	return airlock.Problem(airlock.ECONFLICT, "volume-busy", "volume %s is %s; retry once that has ended", name, b.doing()).RetryLater(5 * time.Second)
}

// quotaReader fails once more than left bytes were read.
type quotaReader struct {
	r    io.Reader
	left int64
	read int64
	over bool
}

func (q *quotaReader) Read(p []byte) (int, error) {
	n, err := q.r.Read(p)
	q.read += int64(n)
	if q.read > q.left {
		q.over = true
		return n, errors.New("snapshot quota exceeded")
	}
	return n, err
}

// restore fills the new, empty volume k (marked restoring) with the
// snapshot's files, checking the blob as it reads. The caller lifts the
// mark, or drops a volume whose restore failed.
func (s *Service) restore(ctx context.Context, tenant *airlock.Tenant, k key, snap *airlock.VolumeSnapshot) error {
	holder := "restore:" + snap.ID + ":" + k.name
	s.mu.Lock()
	s.hold(k, holder)
	err := s.mount(ctx, k)
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if err := s.release(holder); err != nil {
			s.cfg.Logger.Error("unmount a volume after its restore", "volume", k.name, "err", err)
		}
	}()
	if err != nil {
		return &airlock.Error{Code: airlock.EUNAVAILABLE, Type: "volume-failed", Message: "volume " + k.name + " could not be mounted", Err: err}
	}
	v, err := s.cfg.Store.Volume(ctx, k.tenant, k.name)
	if err != nil {
		return err
	}
	return s.extract(ctx, tenant, snap, s.mountDir(k), v.SizeMiB)
}

// extract opens a snapshot's blob, checks it as it reads and writes the
// files into dir.
func (s *Service) extract(ctx context.Context, tenant *airlock.Tenant, snap *airlock.VolumeSnapshot, dir string, sizeMiB int64) error {
	sc := s.cfg.Snapshots
	rc, size, err := sc.Blobs.Open(ctx, snap.BlobKey)
	if err != nil {
		if airlock.ErrorCode(err) == airlock.ENOTFOUND {
			return damaged(snap.ID, "its stored data is missing")
		}
		return err
	}
	defer rc.Close()
	if size != snap.Bytes {
		return damaged(snap.ID, fmt.Sprintf("%d bytes stored, %d recorded", size, snap.Bytes))
	}
	h := sha256.New()
	sr, err := seal.NewReader(io.TeeReader(rc, h), func(keyID string) ([]byte, error) {
		return sc.Keys.DataKeyByID(ctx, tenant.ID, keyID)
	}, volumeSnapshotAAD(tenant.ID, snap.ID))
	if err != nil {
		if errors.Is(err, seal.ErrCorrupt) {
			return damaged(snap.ID, "its header does not check")
		}
		return err
	}
	_, err = wsarchive.Extract(ctx, sr, dir, s.cfg.UID, s.cfg.GID, archiveLimits(max(sizeMiB, snap.SizeMiB)))
	if err == nil {
		// Read to the end: the final chunk proves nothing was cut off.
		_, err = io.Copy(io.Discard, sr)
	}
	switch {
	case errors.Is(err, seal.ErrCorrupt):
		return damaged(snap.ID, "its data does not authenticate: changed, reordered or cut short")
	case errors.Is(err, wsarchive.ErrInvalid):
		return damaged(snap.ID, err.Error())
	case errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT):
		return airlock.Problem(airlock.ETOOLARGE, "snapshot-too-large", "snapshot %s does not fit a volume of %d MiB; ask for a larger size_mib", snap.ID, sizeMiB)
	case err != nil:
		return err
	}
	if hex.EncodeToString(h.Sum(nil)) != snap.SHA256 {
		return damaged(snap.ID, "its hash does not match the record")
	}
	return nil
}

// ListVolumeSnapshots returns the snapshots of the tenant's volume,
// newest first; snapshots of a deleted volume are listed under its name.
func (s *Service) ListVolumeSnapshots(ctx context.Context, tenant *airlock.Tenant, name string) ([]*airlock.VolumeSnapshot, error) {
	if err := s.snapshotsOn(); err != nil {
		return nil, err
	}
	if !airlock.ValidVolumeName(name) {
		return nil, volumeNotFound(name)
	}
	list, err := s.cfg.Store.ListVolumeSnapshots(ctx, tenant.ID, name)
	if err != nil {
		return nil, err
	}
	if len(list) == 0 {
		if _, err := s.cfg.Store.Volume(ctx, tenant.ID, name); err != nil {
			return nil, err
		}
	}
	return list, nil
}

// DeleteVolumeSnapshot deletes one of the volume's snapshots and its
// blob; volumes made from it keep their files.
func (s *Service) DeleteVolumeSnapshot(ctx context.Context, tenant *airlock.Tenant, name, id string) error {
	if err := s.snapshotsOn(); err != nil {
		return err
	}
	if !airlock.ValidVolumeSnapshotID(id) {
		return airlock.Problem(airlock.ENOTFOUND, "volume-snapshot-not-found", "no volume snapshot %q", id)
	}
	snap, err := s.cfg.Store.VolumeSnapshot(ctx, tenant.ID, id)
	if err != nil {
		return err
	}
	if snap.Volume != name {
		return airlock.Problem(airlock.ENOTFOUND, "volume-snapshot-not-found", "volume %s has no snapshot %s", name, id)
	}
	if err := s.cfg.Store.DeleteVolumeSnapshot(ctx, tenant.ID, id); err != nil {
		return err
	}
	if err := s.cfg.Snapshots.Blobs.Delete(ctx, snap.BlobKey); err != nil && airlock.ErrorCode(err) != airlock.ENOTFOUND {
		s.cfg.Logger.Error("delete volume snapshot blob", "snapshot", id, "err", err)
	}
	return nil
}
