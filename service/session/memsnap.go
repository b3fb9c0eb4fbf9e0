package session

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/seal"
)

// Memory snapshots: the whole sandbox saved as for a pause, written as one
// stream by its backend (airlock.PauseArchiver), sealed and stored like a
// workspace snapshot. The session it was taken of is restored at once and
// goes on; a session made from it is restored from the saved state and
// reseeded like a fork.

// runtimeOf names a backend and the version of its saved states.
func runtimeOf(b airlock.Backend) string {
	v := ""
	if s, ok := b.(airlock.Snapshotter); ok {
		v = s.SnapshotVersion()
	}
	return b.Name() + " " + v
}

// archiver returns the named backend as a pause archiver, with the
// runtime it saves under.
func (m *Manager) archiver(name string) (airlock.PauseArchiver, string) {
	for _, b := range m.cfg.Provisioner.Backends() {
		if b.Name() == name {
			if a, ok := b.(airlock.PauseArchiver); ok && airlock.FeaturesOf(b).PauseArchive {
				return a, runtimeOf(b)
			}
		}
	}
	return nil, ""
}

func (m *Manager) createMemorySnapshot(ctx context.Context, tenant *airlock.Tenant, id string, req airlock.CreateSnapshotRequest) (*airlock.Snapshot, error) {
	l, err := m.lookup(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	k := m.cfg.Keep
	used, err := k.Store.SnapshotBytes(ctx, tenant.ID)
	if err != nil {
		return nil, err
	}
	if used >= k.SnapshotQuotaBytes {
		return nil, snapshotQuota(used, k.SnapshotQuotaBytes)
	}
	keyID, dek, err := k.Keys.DataKey(ctx, tenant.ID)
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	if err := m.canFreeze(l); err != nil {
		l.mu.Unlock()
		return nil, err
	}
	lease, rec := l.lease, l.rec
	arch, runtime := m.archiver(lease.BackendName())
	if arch == nil {
		l.mu.Unlock()
		return nil, airlock.Problem(airlock.ECONFLICT, "memory-snapshot-unsupported", "the %s backend cannot save a sandbox's processes; take a workspace snapshot", lease.BackendName())
	}
	l.pausing = true
	close(l.unwatch)
	l.mu.Unlock()

	base := filepath.Join(k.PauseDir, "snap-"+id+"-"+airlock.NewID()[:6])
	started := m.cfg.Now()
	m.suspendPTYs(ctx, l)
	if err := lease.Pause(context.WithoutCancel(ctx), base); err != nil {
		return nil, m.unfreeze(ctx, l, err)
	}
	defer os.RemoveAll(base)
	snap := &airlock.Snapshot{
		ID: m.cfg.NewID(), TenantID: tenant.ID, SessionID: id, Name: req.Name, Kind: airlock.SnapshotMemory,
		Image: rec.Image, Size: rec.Size, KeyID: keyID, Runtime: runtime,
	}
	snap.BlobKey = airlock.SnapshotBlobKey(tenant.ID, snap.ID)
	// The saved state is written before the session runs again on its
	// disk.
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		sw, err := seal.NewWriter(pw, dek, keyID, snapshotAAD(tenant.ID, snap.ID))
		if err == nil {
			if err = arch.WritePaused(ctx, base, sw); err == nil {
				err = sw.Close()
			}
		}
		pw.CloseWithError(err)
		done <- err
	}()
	h := sha256.New()
	q := &quotaReader{r: io.TeeReader(pr, h), left: k.SnapshotQuotaBytes - used}
	n, err := k.Blobs.Put(ctx, snap.BlobKey, q)
	pr.CloseWithError(errors.New("stopped"))
	if werr := <-done; err == nil {
		err = werr
	}
	if rerr := m.resumeInPlace(ctx, tenant, l, base, started); rerr != nil {
		k.Blobs.Delete(context.WithoutCancel(ctx), snap.BlobKey)
		return nil, rerr
	}
	if err != nil {
		k.Blobs.Delete(context.WithoutCancel(ctx), snap.BlobKey)
		if q.over {
			return nil, snapshotQuota(used+q.read, k.SnapshotQuotaBytes)
		}
		return nil, fmt.Errorf("memory snapshot of session %s: %w", id, err)
	}
	snap.Bytes, snap.SHA256, snap.Entries = n, hex.EncodeToString(h.Sum(nil)), 0
	snap.CreatedAt = m.cfg.Now().UTC()
	if err := k.Store.CreateSnapshot(ctx, snap); err != nil {
		k.Blobs.Delete(context.WithoutCancel(ctx), snap.BlobKey)
		return nil, err
	}
	return snap, nil
}

// fromMemorySnapshot readies a create request from a memory snapshot:
// the same image and size, no network, a node with the same runtime; the
// saved state is opened, checked and made a paused sandbox to resume.
func (m *Manager) fromMemorySnapshot(ctx context.Context, tenant *airlock.Tenant, snap *airlock.Snapshot, req *airlock.CreateSessionRequest, opts *createOpts) error {
	switch {
	case req.Image != "" && req.Image != snap.Image:
		return airlock.Problem(airlock.EINVALID, "snapshot-mismatch", "snapshot %s holds a sandbox of image %s; ask for that image or none", snap.ID, snap.Image)
	case req.Size != "" && req.Size != snap.Size:
		return airlock.Problem(airlock.EINVALID, "snapshot-mismatch", "snapshot %s holds a sandbox of size %s; ask for that size or none", snap.ID, snap.Size)
	case (req.Network != nil && req.Network.HasNetwork()) || len(req.BrokerScopes) > 0:
		return airlock.Problem(airlock.EINVALID, "snapshot-mismatch", "a session with process state from a snapshot has no network on this node; ask for none, or restore a workspace snapshot")
	}
	req.Image, req.Size = snap.Image, snap.Size
	if strings.HasPrefix(snap.Image, airlock.TemplateImagePrefix) {
		// A session on a template: its image is resolved as recorded.
		req.Image, opts.image = "", snap.Image
	}
	backend := ""
	for i := 0; i < len(snap.Runtime); i++ {
		if snap.Runtime[i] == ' ' {
			backend = snap.Runtime[:i]
			break
		}
	}
	arch, runtime := m.archiver(backend)
	if arch == nil || runtime != snap.Runtime {
		return airlock.Problem(airlock.ECONFLICT, "snapshot-incompatible", "snapshot %s was saved by a runtime this node does not run (%s); restore it as a workspace snapshot is not possible", snap.ID, backend)
	}
	k := m.cfg.Keep
	sr, h, closeBlob, err := m.openSnapshot(ctx, tenant, snap)
	if err != nil {
		return err
	}
	defer closeBlob()
	dir := filepath.Join(k.PauseDir, "restore-"+snap.ID+"-"+airlock.NewID()[:6])
	if err := arch.ReadPaused(ctx, sr, dir); err != nil {
		if errors.Is(err, seal.ErrCorrupt) {
			return damaged(snap.ID, "its data does not authenticate: changed, reordered or cut short")
		}
		return damaged(snap.ID, "its saved sandbox does not read back")
	}
	if _, err := io.Copy(io.Discard, sr); err != nil || hex.EncodeToString(h.Sum(nil)) != snap.SHA256 {
		os.RemoveAll(dir)
		return damaged(snap.ID, "its data does not authenticate: changed or cut short")
	}
	opts.resumeDir, opts.backend = dir, backend
	opts.cleanup = func() { os.RemoveAll(dir) }
	return nil
}
