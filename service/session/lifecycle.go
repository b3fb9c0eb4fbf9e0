package session

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"time"

	"github.com/airlockhq/airlock"
)

// The lifecycle of issue 25: a session whose lifecycle says on_timeout
// "pause" is paused, not ended, when its timeout or idle timeout passes;
// with auto_resume any request to it while paused (exec, cells, files,
// contexts, and through EnsureRunning a PTY attach or a preview hit)
// resumes it first. Concurrent requests share one resume; each waits for
// it. A paused session ends when it has been paused longer than
// KeepConfig.MaxPausedAge (paused_too_long) or when the tenant's paused
// sessions hold more than KeepConfig.PausedQuotaBytes (paused_quota).

// EndPausedQuota: a pause took the tenant's paused sessions over the
// node's storage quota for them.
const EndPausedQuota = "paused_quota"

// lifecycleFor checks the lifecycle a create request asks for: pausing
// needs the keep work configured and a session without network.
func (m *Manager) lifecycleFor(req airlock.CreateSessionRequest, net airlock.NetworkPolicy) (airlock.SessionLifecycle, error) {
	lc := airlock.SessionLifecycle{OnTimeout: airlock.OnTimeoutEnd}
	if req.Lifecycle == nil {
		return lc, nil
	}
	lc = *req.Lifecycle
	if err := lc.Validate(); err != nil {
		return lc, err
	}
	if !lc.Pauses() && !lc.Resumes() {
		return lc, nil
	}
	if err := m.keepOn(); err != nil {
		return lc, err
	}
	if lc.Pauses() && (net.HasNetwork() || len(req.BrokerScopes) > 0) {
		return lc, airlock.Problem(airlock.EINVALID, "invalid-lifecycle",
			"lifecycle.on_timeout pause needs a session without network or broker scopes: a sandbox with a network cannot be saved and restored")
	}
	return lc, nil
}

// timedOut pauses a session whose timeout or idle timeout passed when
// its lifecycle says so; false means it is to be ended as before (its
// lifecycle ends it, or it cannot be paused now: it is then ended, with
// the reason in its record).
func (m *Manager) timedOut(ctx context.Context, l *live, why string) bool {
	l.mu.Lock()
	pauses := l.rec.Lifecycle.Pauses()
	l.mu.Unlock()
	if !pauses {
		return false
	}
	if _, err := m.pause(ctx, l, why); err != nil {
		switch problemType(err) {
		case "session-busy", "session-pausing", "session-not-ready":
			return true // not now: the next round tries again
		}
		m.cfg.Logger.Warn("pause a session at its timeout; ending it instead", "session", l.rec.ID, "why", why, "err", err)
		return false
	}
	return true
}

// EnsureRunning makes sure the tenant's session is live: a paused
// session whose lifecycle has auto_resume is resumed (the caller waits
// for it; concurrent callers share one resume). Front ends that reach
// into a session without going through the manager's calls (a PTY
// attach, a preview URL hit) call it first. A paused session without
// auto_resume is the session-paused problem; an ended one session-ended.
func (m *Manager) EnsureRunning(ctx context.Context, tenant *airlock.Tenant, id string) error {
	_, err := m.lookupLive(ctx, tenant, id)
	return err
}

// lookupLive is lookup that resumes a paused session with auto_resume.
func (m *Manager) lookupLive(ctx context.Context, tenant *airlock.Tenant, id string) (*live, error) {
	for range 3 {
		l, err := m.lookup(ctx, tenant, id)
		if problemType(err) != "session-paused" {
			return l, err
		}
		rec, rerr := m.cfg.Sessions.Session(ctx, tenant.ID, id)
		if rerr != nil || !rec.Lifecycle.Resumes() {
			return nil, err
		}
		if _, err := m.resume(ctx, tenant, id, "auto"); err != nil {
			switch problemType(err) {
			case "session-not-paused", "session-resuming":
			default:
				return nil, err
			}
		}
	}
	return nil, airlock.Problem(airlock.EUNAVAILABLE, "resume-failed", "session %s could not be resumed now", id).RetryLater(5 * time.Second)
}

// dirBytes is what the files under dir take on disk.
func dirBytes(dir string) int64 {
	var n int64
	filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

// checkPausedQuota records the size of a new pause and ends the session
// if the tenant's paused sessions now hold more than the quota. It
// reports whether the session was ended.
func (m *Manager) checkPausedQuota(ctx context.Context, rec *airlock.Session, p *airlock.SessionPause) bool {
	k := m.cfg.Keep
	p.Bytes = dirBytes(p.Dir)
	if err := k.Store.PutPause(ctx, p); err != nil {
		m.cfg.Logger.Error("record the size of a pause", "session", rec.ID, "err", err)
	}
	if k.PausedQuotaBytes <= 0 {
		return false
	}
	all, err := k.Store.Pauses(ctx)
	if err != nil {
		m.cfg.Logger.Error("list pauses for the paused quota", "err", err)
		return false
	}
	var used int64
	for _, q := range all {
		if q.TenantID == rec.TenantID {
			used += q.Bytes
		}
	}
	if used <= k.PausedQuotaBytes {
		return false
	}
	detail := fmt.Sprintf("the tenant's paused sessions held %d bytes with this one, over the node's paused storage quota of %d", used, k.PausedQuotaBytes)
	if err := m.endPaused(ctx, rec, EndPausedQuota, detail); err != nil {
		m.cfg.Logger.Error("end a session over the paused quota", "session", rec.ID, "err", err)
	}
	return true
}

// problemType is the problem type of a domain error ("" for another).
func problemType(err error) string {
	var ae *airlock.Error
	if errors.As(err, &ae) {
		return ae.Type
	}
	return ""
}
