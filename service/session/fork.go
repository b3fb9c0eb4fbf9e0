package session

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/wsarchive"
	"github.com/airlockhq/airlock/service/provision"
)

// ForkSession makes req.Count new sessions from the session: each has a
// copy of its workspace, and with IncludeMemory its processes and code
// contexts too, restored from one saved state and reseeded (so no two
// share random state; each has its own session ID, sandbox and channel
// token). The parent goes on as it was: with IncludeMemory it is saved
// and restored under a new sandbox ID in a moment, its processes and
// deadline unchanged.
func (m *Manager) ForkSession(ctx context.Context, tenant *airlock.Tenant, id string, req airlock.ForkRequest) (*airlock.ForkResult, error) {
	if err := m.keepOn(); err != nil {
		return nil, err
	}
	if err := req.Validate(); err != nil {
		return nil, err
	}
	if req.IncludeMemory {
		return m.forkMemory(ctx, tenant, id, req.Count)
	}
	return m.forkWorkspace(ctx, tenant, id, req.Count)
}

// childRequest is what a fork of rec asks for: the parent's image, size,
// network and what is left of its time.
func (m *Manager) childRequest(rec airlock.Session) airlock.CreateSessionRequest {
	left := int(rec.ExpiresAt.Sub(m.cfg.Now()) / time.Second)
	req := airlock.CreateSessionRequest{
		Image: rec.Image, Size: rec.Size, TimeoutS: max(left, 1), IdleTimeoutS: rec.Limits.IdleTimeoutS,
		BrokerScopes: rec.BrokerScopes,
	}
	if rec.Network.HasNetwork() {
		n := rec.Network
		req.Network = &n
	}
	return req
}

// makeChildren makes n sessions, at most four at once; on any failure
// those made are destroyed.
func (m *Manager) makeChildren(ctx context.Context, tenant *airlock.Tenant, n int, one func(i int) (*airlock.Session, error)) (*airlock.ForkResult, error) {
	out := make([]*airlock.Session, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 4)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			out[i], errs[i] = one(i)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		for _, s := range out {
			if s != nil {
				m.DeleteSession(context.WithoutCancel(ctx), tenant, s.ID)
			}
		}
		for _, e := range errs {
			if e != nil {
				return nil, e // the first, as a problem the client can read
			}
		}
	}
	return &airlock.ForkResult{Sessions: out}, nil
}

func (m *Manager) forkWorkspace(ctx context.Context, tenant *airlock.Tenant, id string, n int) (*airlock.ForkResult, error) {
	l, end, err := m.begin(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	defer end()
	ws := l.sb().WorkspaceDir()
	if ws == "" {
		return nil, airlock.Problem(airlock.ECONFLICT, "fork-unsupported", "the %s backend gives no host access to a workspace", l.lease.BackendName())
	}
	l.mu.Lock()
	rec := l.rec
	l.mu.Unlock()
	req := m.childRequest(rec)
	return m.makeChildren(ctx, tenant, n, func(int) (*airlock.Session, error) {
		s, _, err := m.create(ctx, tenant, req, "", createOpts{seed: func(ctx context.Context, lease *provision.Lease) error {
			return copyWorkspace(ctx, ws, lease.Sandbox().WorkspaceDir(), archiveLimits(rec.Limits))
		}})
		return s, err
	})
}

// copyWorkspace copies one workspace into another through an archive,
// with the checks of both directions.
func copyWorkspace(ctx context.Context, from, to string, lim wsarchive.Limits) error {
	if to == "" {
		return airlock.Problem(airlock.ECONFLICT, "fork-unsupported", "the backend chosen gives no host access to a workspace")
	}
	uid, gid := -1, -1
	if fi, err := os.Lstat(to); err == nil {
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			uid, gid = int(st.Uid), int(st.Gid)
		}
	}
	pr, pw := io.Pipe()
	go func() {
		_, err := wsarchive.Write(ctx, from, pw, lim)
		pw.CloseWithError(err)
	}()
	_, err := wsarchive.Extract(ctx, pr, to, uid, gid, lim)
	pr.CloseWithError(errors.New("stopped"))
	return err
}

func (m *Manager) forkMemory(ctx context.Context, tenant *airlock.Tenant, id string, n int) (*airlock.ForkResult, error) {
	l, err := m.lookup(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	if err := m.canFreeze(l); err != nil {
		l.mu.Unlock()
		return nil, err
	}
	l.pausing = true
	close(l.unwatch)
	lease := l.lease
	rec := l.rec
	l.mu.Unlock()
	var copier airlock.PauseCopier
	for _, b := range m.cfg.Provisioner.Backends() {
		if b.Name() == lease.BackendName() {
			copier, _ = b.(airlock.PauseCopier)
		}
	}
	if copier == nil {
		m.rewatch(l)
		return nil, airlock.Problem(airlock.ECONFLICT, "fork-unsupported", "the %s backend cannot fork a sandbox's processes; fork without include_memory", lease.BackendName())
	}
	base := filepath.Join(m.cfg.Keep.PauseDir, "fork-"+id+"-"+airlock.NewID()[:6])
	started := m.cfg.Now()
	m.suspendPTYs(ctx, l)
	if err := lease.Pause(context.WithoutCancel(ctx), base); err != nil {
		return nil, m.unfreeze(ctx, l, err)
	}
	defer os.RemoveAll(base)
	// The copies are made before the parent runs again on its own disk.
	dirs := make([]string, n)
	var copyErr error
	for i := range dirs {
		dirs[i] = fmt.Sprintf("%s-%d", base, i)
		if copyErr = copier.CopyPaused(ctx, base, dirs[i]); copyErr != nil {
			break
		}
	}
	defer func() {
		for _, d := range dirs {
			os.RemoveAll(d)
		}
	}()
	if err := m.resumeInPlace(ctx, tenant, l, base, started); err != nil {
		return nil, err
	}
	if copyErr != nil {
		m.cfg.Logger.Error("copy a saved sandbox for a fork", "session", id, "err", copyErr)
		return nil, airlock.Problem(airlock.EUNAVAILABLE, "fork-failed", "the session's state could not be copied for its forks; the session goes on")
	}
	req := m.childRequest(rec)
	return m.makeChildren(ctx, tenant, n, func(i int) (*airlock.Session, error) {
		s, _, err := m.create(ctx, tenant, req, "", createOpts{resumeDir: dirs[i], backend: lease.BackendName()})
		return s, err
	})
}

// resumeInPlace gives a live session, saved into dir a moment ago, its
// sandbox back from there; if that fails the session ends.
func (m *Manager) resumeInPlace(ctx context.Context, tenant *airlock.Tenant, l *live, dir string, since time.Time) error {
	l.mu.Lock()
	rec := l.rec
	backend := l.lease.BackendName()
	l.mu.Unlock()
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), m.cfg.CreateTimeout)
	defer cancel()
	var lease *provision.Lease
	img, err := m.cfg.Images.Resolve(cctx, rec.Image)
	if err == nil {
		var t *provision.Ticket
		claim := sessionClaim(tenant, &rec, m.cfg.Now())
		claim.Continues = true // the session never stopped for its user
		if t, err = m.cfg.Provisioner.AdmitOn(cctx, claim, backend); err == nil {
			lease, err = t.Resume(cctx, provision.Spec{
				ID: restoredID(rec.ID), Image: img, Limits: specLimits(rec.Limits),
				Labels: map[string]string{"airlock.session": rec.ID, "airlock.tenant": tenant.ID},
			}, dir)
		}
	}
	if err != nil {
		m.cfg.Logger.Error("restore a session saved for a fork", "session", rec.ID, "err", err)
		l.mu.Lock()
		l.pausing = false
		l.mu.Unlock()
		m.destroy(ctx, l, airlock.SessionFailed, airlock.EndResumeFailed, "its sandbox, saved for a fork, could not be restored")
		return airlock.Problem(airlock.EUNAVAILABLE, "fork-failed", "session %s was saved for the fork but could not be restored; it has ended", rec.ID)
	}
	l.mu.Lock()
	l.lease = lease
	l.rec.SandboxID = lease.Sandbox().ID()
	l.rec.ExpiresAt = l.rec.ExpiresAt.Add(m.cfg.Now().Sub(since))
	l.unwatch = make(chan struct{})
	l.pausing = false
	m.persist(ctx, l)
	l.mu.Unlock()
	m.reattachPTYs(cctx, l)
	go m.watch(l)
	return nil
}
