package session

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/agent/protocol"
	"github.com/airlockhq/airlock/internal/seal"
	"github.com/airlockhq/airlock/internal/wsarchive"
	"github.com/airlockhq/airlock/service/provision"
)

// Keep work: sealed workspace snapshots, pause and resume, fork.
//
// A snapshot is read from the host side of the session's workspace disk
// (wsarchive, through an os.Root: nothing of the workspace is followed on
// the host), sealed with the tenant's data key as it is read and stored in
// the blob store; nothing else of the sandbox or of airlockd goes in. A
// session made from a snapshot is a fresh sandbox, admitted and placed
// like any other under what its request asks for now; the workspace is
// written into it from the host before it serves, and a blob that fails
// its integrity checks is refused (snapshot-damaged) and the session not
// made.
//
// Pause saves the whole sandbox (memory and disk) to PauseDir on this
// node and ends it; the session is then paused, held by no process and
// by no sandbox, and the record and the directory are all there is of
// it, so a restart of airlockd leaves it as it is. Resume restores it
// under a new sandbox ID and moves its deadline by the time it was
// paused.

// KeepConfig configures snapshots, pause and fork.
type KeepConfig struct {
	Store airlock.KeepStore
	Keys  *seal.Keys    // the tenants' data keys
	Blobs airlock.Blobs // where sealed snapshots go
	// PauseDir holds paused sandboxes on this node.
	PauseDir string
	// SnapshotQuotaBytes is how much sealed snapshot data one tenant may
	// keep (10 GiB).
	SnapshotQuotaBytes int64
	// MaxPausedAge ends a session paused for longer (7 days).
	MaxPausedAge time.Duration
	// PausedQuotaBytes is how much one tenant's paused sessions may hold
	// on disk; a pause that goes over ends its session (paused_quota).
	// Zero means no quota.
	PausedQuotaBytes int64
}

func (k *KeepConfig) validate() error {
	if k.Store == nil {
		return nil
	}
	if k.Keys == nil || k.Blobs == nil || k.PauseDir == "" {
		return fmt.Errorf("session: keep needs data keys, a blob store and a pause directory")
	}
	if k.SnapshotQuotaBytes == 0 {
		k.SnapshotQuotaBytes = 10 << 30
	}
	if k.MaxPausedAge == 0 {
		k.MaxPausedAge = 7 * 24 * time.Hour
	}
	if k.SnapshotQuotaBytes < 0 || k.MaxPausedAge < 0 || k.PausedQuotaBytes < 0 {
		return fmt.Errorf("session: keep quota and paused age must not be negative")
	}
	return os.MkdirAll(k.PauseDir, 0o700)
}

// keepState is what the manager tracks of pauses and resumes.
type keepState struct {
	mu       sync.Mutex
	resuming map[string]chan struct{} // closed when the resume ends
}

func (m *Manager) keepOn() error {
	if m.cfg.Keep.Store == nil {
		return airlock.Problem(airlock.EUNAVAILABLE, "keep-unavailable", "snapshots, pause and fork are not configured on this node (it needs a master key)")
	}
	return nil
}

// createOpts are what a fork or a restore adds to making a session.
type createOpts struct {
	// seed fills the new sandbox before the session serves.
	seed func(ctx context.Context, lease *provision.Lease) error
	// resumeDir, when set, is a paused sandbox to resume on backend
	// instead of a fresh one; the session's code contexts are then
	// taken over and reseeded.
	resumeDir string
	backend   string
	// image, when set, is the recorded image name of the saved sandbox
	// (a memory snapshot's), resolved as recorded: a template's image
	// ("template:<id>") among them, which a request may not name.
	image string
	// cleanup, if set, runs once the session is made (or not).
	cleanup func()
}

func pausedProblem(id string) error {
	return airlock.Problem(airlock.ECONFLICT, "session-paused", "session %s is paused; resume it first (POST /v1/sessions/%s/resume)", id, id)
}

func snapshotAAD(tenantID, id string) []byte {
	return []byte("airlock-snapshot-v1\x00" + tenantID + "\x00" + id)
}

func damaged(id string, why string) error {
	return airlock.Problem(airlock.EUNPROCESSABLE, "snapshot-damaged",
		"snapshot %s failed its integrity check and was not restored (%s); nothing was made from it", id, why)
}

func snapshotQuota(used, quota int64) error {
	return airlock.Problem(airlock.ERATELIMITED, "snapshot-quota",
		"the tenant's snapshots hold %d bytes of its %d; delete some (DELETE /v1/snapshots/{id}) before taking more", used, quota)
}

// archiveLimits bounds a workspace archive of a session with limits l.
func archiveLimits(l airlock.SessionLimits) wsarchive.Limits {
	return wsarchive.Limits{MaxBytes: max(l.DiskBytes, 1<<30)}
}

// CreateSnapshot saves the session's workspace, sealed, in the blob store.
func (m *Manager) CreateSnapshot(ctx context.Context, tenant *airlock.Tenant, id string, req airlock.CreateSnapshotRequest) (*airlock.Snapshot, error) {
	if err := m.keepOn(); err != nil {
		return nil, err
	}
	if err := req.Validate(); err != nil {
		return nil, err
	}
	if req.IncludeMemory {
		return m.createMemorySnapshot(ctx, tenant, id, req)
	}
	l, end, err := m.begin(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	defer end()
	ws := l.sb().WorkspaceDir()
	if ws == "" {
		return nil, airlock.Problem(airlock.ECONFLICT, "snapshot-unsupported", "the %s backend gives no host access to a workspace", l.lease.BackendName())
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
	rec := l.rec
	l.mu.Unlock()
	snap := &airlock.Snapshot{
		ID: m.cfg.NewID(), TenantID: tenant.ID, SessionID: id, Name: req.Name, Kind: airlock.SnapshotWorkspace,
		Image: rec.Image, Size: rec.Size, KeyID: keyID,
	}
	snap.BlobKey = airlock.SnapshotBlobKey(tenant.ID, snap.ID)

	pr, pw := io.Pipe()
	var st wsarchive.Stats
	done := make(chan error, 1)
	go func() {
		sw, err := seal.NewWriter(pw, dek, keyID, snapshotAAD(tenant.ID, snap.ID))
		if err == nil {
			st, err = wsarchive.Write(ctx, ws, sw, archiveLimits(rec.Limits))
			if err == nil {
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
	werr := <-done
	if err == nil {
		err = werr
	}
	if err != nil {
		k.Blobs.Delete(context.WithoutCancel(ctx), snap.BlobKey)
		if q.over {
			return nil, snapshotQuota(used+q.read, k.SnapshotQuotaBytes)
		}
		return nil, fmt.Errorf("snapshot of session %s: %w", id, err)
	}
	snap.Bytes, snap.SHA256, snap.Entries = n, hex.EncodeToString(h.Sum(nil)), st.Entries
	snap.CreatedAt = m.cfg.Now().UTC()
	if err := k.Store.CreateSnapshot(ctx, snap); err != nil {
		k.Blobs.Delete(context.WithoutCancel(ctx), snap.BlobKey)
		return nil, err
	}
	if st.Skipped > 0 {
		m.cfg.Logger.Info("snapshot left out entries that are not kept (sockets, devices, links out of the workspace)", "snapshot", snap.ID, "skipped", st.Skipped)
	}
	return snap, nil
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

// Snapshot returns one of the tenant's snapshots.
func (m *Manager) Snapshot(ctx context.Context, tenant *airlock.Tenant, id string) (*airlock.Snapshot, error) {
	if err := m.keepOn(); err != nil {
		return nil, err
	}
	return m.cfg.Keep.Store.Snapshot(ctx, tenant.ID, id)
}

// ListSnapshots returns a page of the tenant's snapshots, newest first.
func (m *Manager) ListSnapshots(ctx context.Context, tenant *airlock.Tenant, before string, limit int) (*airlock.SnapshotPage, error) {
	if err := m.keepOn(); err != nil {
		return nil, err
	}
	if limit <= 0 {
		limit = 50
	}
	list, err := m.cfg.Keep.Store.ListSnapshots(ctx, tenant.ID, before, limit)
	if err != nil {
		return nil, err
	}
	page := &airlock.SnapshotPage{Snapshots: list}
	if page.Snapshots == nil {
		page.Snapshots = []*airlock.Snapshot{}
	}
	if len(list) == limit {
		page.NextCursor = list[len(list)-1].ID
	}
	return page, nil
}

// DeleteSnapshot deletes one of the tenant's snapshots and its blob.
func (m *Manager) DeleteSnapshot(ctx context.Context, tenant *airlock.Tenant, id string) error {
	if err := m.keepOn(); err != nil {
		return err
	}
	s, err := m.cfg.Keep.Store.Snapshot(ctx, tenant.ID, id)
	if err != nil {
		return err
	}
	if st := m.cfg.SessionTemplates; st != nil && s.Kind == airlock.SnapshotMemory {
		name, err := st.SnapshotHolder(ctx, tenant, id)
		if err != nil {
			return err
		}
		if name != "" {
			return airlock.Problem(airlock.ECONFLICT, "snapshot-in-use", "snapshot %s is the memory of template %q; delete the template, and the snapshot goes with it", id, name).With("template", name)
		}
	}
	if err := m.cfg.Keep.Store.DeleteSnapshot(ctx, tenant.ID, id); err != nil {
		return err
	}
	if err := m.cfg.Keep.Blobs.Delete(ctx, s.BlobKey); err != nil && airlock.ErrorCode(err) != airlock.ENOTFOUND {
		m.cfg.Logger.Error("delete snapshot blob", "snapshot", id, "err", err)
	}
	return nil
}

// fromSnapshot readies a create request that names a snapshot: the
// tenant's own (another's is not found), its image unless the request
// names one, and its workspace written into the new sandbox.
func (m *Manager) fromSnapshot(ctx context.Context, tenant *airlock.Tenant, req *airlock.CreateSessionRequest, opts *createOpts) error {
	if req.FromSnapshot == "" {
		return nil
	}
	if err := m.keepOn(); err != nil {
		return err
	}
	snap, err := m.cfg.Keep.Store.Snapshot(ctx, tenant.ID, req.FromSnapshot)
	if err != nil {
		return err
	}
	if snap.Kind == airlock.SnapshotMemory {
		return m.fromMemorySnapshot(ctx, tenant, snap, req, opts)
	}
	if req.Image == "" {
		req.Image = snap.Image
	}
	opts.seed = func(ctx context.Context, lease *provision.Lease) error {
		return m.restoreWorkspace(ctx, tenant, snap, lease.Sandbox().WorkspaceDir())
	}
	return nil
}

// openSnapshot opens a snapshot's blob for reading: the plaintext as it
// is authenticated, and the hash of the stored bytes read so far (to
// compare with the record once all is read). A blob that is missing, of
// the wrong size or whose header does not check is a snapshot-damaged
// problem.
func (m *Manager) openSnapshot(ctx context.Context, tenant *airlock.Tenant, snap *airlock.Snapshot) (io.Reader, hash.Hash, func(), error) {
	k := m.cfg.Keep
	rc, size, err := k.Blobs.Open(ctx, snap.BlobKey)
	if err != nil {
		if airlock.ErrorCode(err) == airlock.ENOTFOUND {
			return nil, nil, nil, damaged(snap.ID, "its stored data is missing")
		}
		return nil, nil, nil, err
	}
	if size != snap.Bytes {
		rc.Close()
		return nil, nil, nil, damaged(snap.ID, fmt.Sprintf("%d bytes stored, %d recorded", size, snap.Bytes))
	}
	h := sha256.New()
	sr, err := seal.NewReader(io.TeeReader(rc, h), func(keyID string) ([]byte, error) {
		return k.Keys.DataKeyByID(ctx, tenant.ID, keyID)
	}, snapshotAAD(tenant.ID, snap.ID))
	if err != nil {
		rc.Close()
		if errors.Is(err, seal.ErrCorrupt) {
			return nil, nil, nil, damaged(snap.ID, "its header does not check")
		}
		return nil, nil, nil, err
	}
	return sr, h, func() { rc.Close() }, nil
}

// restoreWorkspace opens a snapshot's blob, checks it as it reads and
// writes the workspace into ws.
func (m *Manager) restoreWorkspace(ctx context.Context, tenant *airlock.Tenant, snap *airlock.Snapshot, ws string) error {
	if ws == "" {
		return airlock.Problem(airlock.ECONFLICT, "snapshot-unsupported", "the backend chosen gives no host access to a workspace")
	}
	sr, h, closeBlob, err := m.openSnapshot(ctx, tenant, snap)
	if err != nil {
		return err
	}
	defer closeBlob()
	uid, gid := -1, -1
	if fi, err := os.Lstat(ws); err == nil {
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			uid, gid = int(st.Uid), int(st.Gid)
		}
	}
	_, err = wsarchive.Extract(ctx, sr, ws, uid, gid, archiveLimits(airlock.SessionLimits{DiskBytes: snap.Bytes * 2}))
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
		return airlock.Problem(airlock.ETOOLARGE, "snapshot-too-large", "snapshot %s does not fit the disk of the session's size", snap.ID)
	case err != nil:
		return err
	}
	if hex.EncodeToString(h.Sum(nil)) != snap.SHA256 {
		return damaged(snap.ID, "its hash does not match the record")
	}
	return nil
}

// pausedAt fills in when a paused session was paused.
func (m *Manager) pausedAt(ctx context.Context, s *airlock.Session) {
	if s.State != airlock.SessionPaused || m.cfg.Keep.Store == nil {
		return
	}
	if p, err := m.cfg.Keep.Store.Pause(ctx, s.TenantID, s.ID); err == nil {
		at := p.PausedAt
		s.PausedAt = &at
	}
}

// PauseSession saves the session's sandbox to disk on this node and ends
// it; the session is paused until resumed. Only a ready session with
// nothing running and no network can be paused.
func (m *Manager) PauseSession(ctx context.Context, tenant *airlock.Tenant, id string) (*airlock.Session, error) {
	if err := m.keepOn(); err != nil {
		return nil, err
	}
	l, err := m.lookup(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	return m.pause(ctx, l, airlock.PauseByRequest)
}

// pause saves a live session's sandbox and ends it; why (request,
// timeout, idle) goes in its session.paused event.
func (m *Manager) pause(ctx context.Context, l *live, why string) (*airlock.Session, error) {
	tenant := &airlock.Tenant{ID: l.rec.TenantID}
	id := l.rec.ID
	l.mu.Lock()
	if err := m.canFreeze(l); err != nil {
		l.mu.Unlock()
		return nil, err
	}
	l.pausing = true
	close(l.unwatch)
	lease := l.lease
	l.mu.Unlock()

	dir := filepath.Join(m.cfg.Keep.PauseDir, id)
	os.RemoveAll(dir) // left by a pause that did not finish
	now := m.cfg.Now().UTC()
	pr := &airlock.SessionPause{SessionID: id, TenantID: tenant.ID, Dir: dir, Backend: lease.BackendName(), PausedAt: now}
	if err := m.cfg.Keep.Store.PutPause(ctx, pr); err != nil {
		m.rewatch(l)
		return nil, err
	}
	m.suspendPTYs(ctx, l)
	if err := lease.Pause(context.WithoutCancel(ctx), dir); err != nil {
		m.cfg.Keep.Store.DeletePause(context.WithoutCancel(ctx), id)
		return nil, m.unfreeze(ctx, l, err)
	}
	m.keepPTYs(l) // before it is paused on record: a resume may follow at once
	l.mu.Lock()
	l.lease = nil
	l.rec.PausedAt = &now
	l.rec.LastActiveAt = now
	l.pausedBy = why
	m.move(ctx, l, airlock.SessionPaused)
	l.pausing = false
	rec := l.rec
	l.mu.Unlock()
	m.forget(l)
	if m.checkPausedQuota(context.WithoutCancel(ctx), &rec, pr) {
		if s, err := m.cfg.Sessions.Session(ctx, rec.TenantID, id); err == nil {
			return s, nil
		}
	}
	return &rec, nil
}

// canFreeze checks that a session can be saved now (l.mu held).
func (m *Manager) canFreeze(l *live) error {
	id := l.rec.ID
	switch {
	case l.pausing:
		return airlock.Problem(airlock.ECONFLICT, "session-pausing", "session %s is being paused or forked", id)
	case l.rec.State == airlock.SessionCreating:
		return airlock.Problem(airlock.ECONFLICT, "session-not-ready", "session %s is still being created", id)
	case l.rec.State == airlock.SessionBusy || l.inflight > 0:
		return airlock.Problem(airlock.ECONFLICT, "session-busy", "session %s is running a call; pause it once its calls have ended", id)
	case l.rec.State != airlock.SessionReady:
		rec := l.rec
		return ended(&rec)
	case l.rec.Network.HasNetwork() || len(l.rec.BrokerScopes) > 0:
		return airlock.Problem(airlock.ECONFLICT, "pause-unsupported", "session %s has a network; a sandbox with a network cannot be saved and restored on this node", id)
	case len(l.rec.Volumes) > 0:
		return airlock.Problem(airlock.ECONFLICT, "pause-unsupported", "session %s has volumes mounted; a sandbox with volumes cannot be saved and restored", id)
	case isClosed(l.detached):
		return shuttingDown()
	}
	return nil
}

// rewatch undoes the start of a pause whose sandbox was not touched.
func (m *Manager) rewatch(l *live) {
	l.mu.Lock()
	l.pausing = false
	l.unwatch = make(chan struct{})
	l.mu.Unlock()
	go m.watch(l)
}

// unfreeze handles a failed save: a sandbox that still runs serves on, one
// that is gone ends the session.
func (m *Manager) unfreeze(ctx context.Context, l *live, err error) error {
	m.cfg.Logger.Error("pause session", "session", l.rec.ID, "err", err)
	select {
	case <-l.sb().Done():
		l.mu.Lock()
		l.pausing = false
		l.mu.Unlock()
		m.destroy(ctx, l, airlock.SessionFailed, airlock.EndSandboxExited, "the sandbox ended while it was being saved")
		return airlock.Problem(airlock.EUNAVAILABLE, "pause-failed", "session %s could not be saved and its sandbox ended", l.rec.ID)
	default:
	}
	m.reattachPTYs(context.WithoutCancel(ctx), l)
	m.rewatch(l)
	return airlock.Problem(airlock.EUNAVAILABLE, "pause-failed", "session %s could not be saved; it goes on running", l.rec.ID).RetryLater(5 * time.Second)
}

// ResumeSession restores a paused session on this node; its deadline
// moves by the time it was paused.
func (m *Manager) ResumeSession(ctx context.Context, tenant *airlock.Tenant, id string) (*airlock.Session, error) {
	return m.resume(ctx, tenant, id, airlock.PauseByRequest)
}

// resume restores a paused session; by (request, auto) goes in its
// session.resumed event. An automatic resume that finds one under way
// waits for it and then answers session-resuming, for the caller to
// look again.
func (m *Manager) resume(ctx context.Context, tenant *airlock.Tenant, id, by string) (*airlock.Session, error) {
	if err := m.keepOn(); err != nil {
		return nil, err
	}
	m.keep.mu.Lock()
	if m.keep.resuming == nil {
		m.keep.resuming = map[string]chan struct{}{}
	}
	if ch := m.keep.resuming[id]; ch != nil {
		m.keep.mu.Unlock()
		if by == "auto" {
			select {
			case <-ch:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		return nil, airlock.Problem(airlock.ECONFLICT, "session-resuming", "session %s is being resumed", id)
	}
	done := make(chan struct{})
	m.keep.resuming[id] = done
	m.keep.mu.Unlock()
	defer func() {
		m.keep.mu.Lock()
		delete(m.keep.resuming, id)
		m.keep.mu.Unlock()
		close(done)
	}()
	m.mu.Lock()
	l, closed := m.live[id], m.closed
	m.mu.Unlock()
	if l != nil {
		if _, err := m.lookup(ctx, tenant, id); err != nil {
			return nil, err
		}
		return nil, airlock.Problem(airlock.ECONFLICT, "session-not-paused", "session %s is not paused", id)
	}
	rec, err := m.cfg.Sessions.Session(ctx, tenant.ID, id)
	if airlock.ErrorCode(err) == airlock.ENOTFOUND {
		return nil, notFound(id)
	}
	if err != nil {
		return nil, err
	}
	if rec.State != airlock.SessionPaused {
		if rec.State.Final() {
			return nil, ended(rec)
		}
		return nil, airlock.Problem(airlock.ECONFLICT, "session-not-paused", "session %s is not paused (%s)", id, rec.State)
	}
	if closed {
		return nil, shuttingDown()
	}
	p, err := m.cfg.Keep.Store.Pause(ctx, tenant.ID, id)
	if airlock.ErrorCode(err) == airlock.ENOTFOUND {
		m.endPaused(ctx, rec, airlock.EndResumeFailed, "its saved sandbox is not on record")
		return nil, airlock.Problem(airlock.ECONFLICT, "session-ended", "session %s could not be resumed: its saved sandbox is gone; the session has ended", id)
	}
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(p.Dir); err != nil {
		m.endPaused(ctx, rec, airlock.EndResumeFailed, "its saved sandbox is missing from the node")
		return nil, airlock.Problem(airlock.ECONFLICT, "session-ended", "session %s could not be resumed: its saved sandbox is missing; the session has ended", id)
	}
	img, err := m.cfg.Images.Resolve(ctx, rec.Image)
	if err != nil {
		return nil, err
	}
	ticket, err := m.cfg.Provisioner.AdmitOn(ctx, sessionClaim(tenant, rec, m.cfg.Now()), p.Backend)
	if err != nil {
		return nil, err
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), m.cfg.CreateTimeout)
	defer cancel()
	lease, err := ticket.Resume(cctx, provision.Spec{
		ID: restoredID(id), Image: img, Limits: specLimits(rec.Limits),
		Labels: map[string]string{"airlock.session": id, "airlock.tenant": tenant.ID},
	}, p.Dir)
	if err != nil {
		m.cfg.Logger.Error("resume session", "session", id, "err", err)
		return nil, airlock.Problem(airlock.EUNAVAILABLE, "resume-failed", "session %s could not be resumed now; it stays paused", id).RetryLater(5 * time.Second)
	}
	now := m.cfg.Now().UTC()
	l = newLive(*rec)
	l.lease = lease
	// Its terminals are back before any call reaches it.
	m.resumePTYs(cctx, l, tenant)
	l.rec.ExpiresAt = rec.ExpiresAt.Add(now.Sub(p.PausedAt))
	if least := now.Add(time.Duration(rec.Limits.TimeoutS) * time.Second); l.rec.ExpiresAt.Before(least) {
		// Paused at its timeout: a resume gives it its timeout again.
		l.rec.ExpiresAt = least
	}
	l.rec.LastActiveAt = now
	l.rec.PausedAt = nil
	l.rec.SandboxID = lease.Sandbox().ID()
	l.resumedBy = by
	m.mu.Lock()
	m.live[id] = l
	m.mu.Unlock()
	l.mu.Lock()
	m.move(ctx, l, airlock.SessionReady)
	l.mu.Unlock()
	if err := m.cfg.Keep.Store.DeletePause(context.WithoutCancel(ctx), id); err != nil {
		m.cfg.Logger.Error("drop pause record", "session", id, "err", err)
	}
	os.RemoveAll(p.Dir)
	m.restored(cctx, l, false)
	go m.watch(l)
	return m.snapshot(ctx, l), nil
}

// specLimits are the limits a session's sandbox is made with (a run's
// wall time is its own: see sandboxLimits).
func specLimits(l airlock.SessionLimits) airlock.Limits {
	return airlock.Limits{CPUs: l.CPUs, MemoryBytes: l.MemoryBytes, DiskBytes: l.DiskBytes, Pids: l.Pids, OutputBytes: l.OutputBytes}
}

// reseedPython renews, in a restored clone's Python context, the random
// state that clones of one saved state would otherwise share (uuid4 and
// secrets read the kernel's entropy anew already).
const reseedPython = `(lambda m: (m["random"].seed() if "random" in m else None, m["numpy"].random.seed() if "numpy" in m else None) and None)(__import__("sys").modules)`

// restored takes over the code contexts of a restored sandbox, and with
// reseed renews their random state.
func (m *Manager) restored(ctx context.Context, l *live, reseed bool) {
	agent := l.sb().Agent()
	infos, err := agent.ListContexts(ctx)
	if err != nil {
		m.cfg.Logger.Warn("the restored agent did not list its code contexts", "session", l.rec.ID, "err", err)
		return
	}
	l.mu.Lock()
	for _, c := range infos {
		l.contexts[c.ID] = &codeContext{rec: airlock.CodeContext{
			ID: c.ID, SessionID: l.rec.ID, Language: airlock.ContextLanguage(c.Language), State: c.State,
			Runs: c.Runs, CreatedAt: time.UnixMilli(c.CreatedAtMS).UTC(),
		}}
	}
	l.mu.Unlock()
	if !reseed {
		return
	}
	for _, c := range infos {
		if c.Language != protocol.ContextPython || c.State != protocol.ContextIdle {
			continue
		}
		if _, err := agent.RunCell(ctx, c.ID, reseedPython, 10000, nil, nil); err != nil {
			m.cfg.Logger.Warn("reseed a forked code context", "session", l.rec.ID, "context", c.ID, "err", err)
		}
	}
}

// deletePaused ends a paused session (DELETE): its saved sandbox is
// removed. ok is false when the session is not paused.
func (m *Manager) deletePaused(ctx context.Context, tenant *airlock.Tenant, id string) (*airlock.Session, bool, error) {
	if m.cfg.Keep.Store == nil {
		return nil, false, nil
	}
	rec, err := m.cfg.Sessions.Session(ctx, tenant.ID, id)
	if err != nil || rec.State != airlock.SessionPaused {
		return nil, false, nil
	}
	m.keep.mu.Lock()
	busy := m.keep.resuming[id] != nil
	m.keep.mu.Unlock()
	if busy {
		return nil, true, airlock.Problem(airlock.ECONFLICT, "session-resuming", "session %s is being resumed", id)
	}
	if err := m.endPaused(ctx, rec, airlock.EndDeleted, "deleted through the API while paused"); err != nil {
		return nil, true, err
	}
	s, err := m.Session(ctx, tenant, id)
	return s, true, err
}

// endPaused ends a paused session and removes its saved sandbox.
func (m *Manager) endPaused(ctx context.Context, s *airlock.Session, reason, detail string) error {
	ctx = context.WithoutCancel(ctx)
	m.endPausedPTYs(s.ID)
	if p, err := m.cfg.Keep.Store.Pause(ctx, s.TenantID, s.ID); err == nil {
		os.RemoveAll(p.Dir)
	}
	s.State = airlock.SessionDestroying
	s.EndReason, s.EndDetail = reason, detail
	if err := m.cfg.Sessions.UpdateSession(ctx, s); err != nil {
		return err
	}
	now := m.cfg.Now().UTC()
	s.State, s.EndedAt = airlock.SessionDestroyed, &now
	if err := m.cfg.Sessions.UpdateSession(ctx, s); err != nil {
		return err
	}
	m.emitEnded(ctx, s)
	return m.cfg.Keep.Store.DeletePause(ctx, s.ID)
}

// reapPaused ends sessions paused for longer than MaxPausedAge, and
// removes saved sandboxes no paused session has. In a fleet the store
// holds every node's pauses: a node touches only its own (a session its
// records hold, or a saved sandbox on its own disk), never another
// node's records or directories.
func (m *Manager) reapPaused(ctx context.Context, now time.Time) int {
	if m.cfg.Keep.Store == nil {
		return 0
	}
	pauses, err := m.cfg.Keep.Store.Pauses(ctx)
	if err != nil {
		m.cfg.Logger.Error("list paused sessions", "err", err)
		return 0
	}
	own, err := m.cfg.Sessions.LiveSessions(ctx) // this node's alone
	if err != nil {
		m.cfg.Logger.Error("list this node's sessions", "err", err)
		return 0
	}
	mine := make(map[string]bool, len(own))
	for _, s := range own {
		mine[s.ID] = true
	}
	n := 0
	for _, p := range pauses {
		if !mine[p.SessionID] {
			if _, err := os.Stat(p.Dir); err != nil {
				continue // another node's, or not ours to judge
			}
		}
		m.keep.mu.Lock()
		busy := m.keep.resuming[p.SessionID] != nil
		m.keep.mu.Unlock()
		if busy {
			continue
		}
		s, err := m.cfg.Sessions.Session(ctx, p.TenantID, p.SessionID)
		switch {
		case err != nil && airlock.ErrorCode(err) != airlock.ENOTFOUND:
			continue
		case err != nil || s.State != airlock.SessionPaused:
			// Left by a pause or resume that did not finish.
			if now.Sub(p.PausedAt) > time.Minute {
				os.RemoveAll(p.Dir)
				m.cfg.Keep.Store.DeletePause(ctx, p.SessionID)
			}
		case now.Sub(p.PausedAt) >= m.cfg.Keep.MaxPausedAge:
			if err := m.endPaused(ctx, s, airlock.EndPausedTooLong, fmt.Sprintf("it stayed paused for more than %s", m.cfg.Keep.MaxPausedAge)); err != nil {
				m.cfg.Logger.Error("end a session paused too long", "session", s.ID, "err", err)
				continue
			}
			n++
		}
	}
	return n
}

var _ airlock.KeepService = (*Manager)(nil)

// restoredID names a sandbox restored for session id (each restore makes
// a new one): no longer than the "ss-" + id of a fresh one, since its
// channel socket's path must stay within the 108 bytes of a unix address.
func restoredID(id string) string {
	return "ss-" + id[:min(len(id), 16)] + "-" + airlock.NewID()[:8]
}

// sessionClaim is the claim of an existing session's sandbox (a resume):
// its size counts against the tenant's quotas like a new session's, until
// the expiry it will have (moved by the time it was paused).
func sessionClaim(tenant *airlock.Tenant, rec *airlock.Session, now time.Time) provision.Claim {
	deadline := rec.ExpiresAt
	if rec.PausedAt != nil {
		deadline = deadline.Add(now.Sub(*rec.PausedAt))
	}
	return provision.Claim{
		Kind: provision.Session, Tenant: tenant,
		Limits:   airlock.Limits{CPUs: rec.Limits.CPUs, MemoryBytes: rec.Limits.MemoryBytes},
		Deadline: deadline,
	}
}
