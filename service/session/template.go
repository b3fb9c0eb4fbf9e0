package session

import (
	"context"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/service/template"
)

// SessionTemplates is what the manager needs of the template service to
// make a template from a session (template.Service).
type SessionTemplates interface {
	// CheckName answers 409 when the tenant has a template of that name
	// and 403 when its templates are over their quota.
	CheckName(ctx context.Context, tenant *airlock.Tenant, name string) error
	// CreateFromSession records the template, copies the workspace
	// through src.CopyWorkspace before it returns and builds the rest
	// in the background.
	CreateFromSession(ctx context.Context, tenant *airlock.Tenant, name string, src template.SessionSource) (*airlock.Template, error)
	// SnapshotHolder names the tenant's template that holds a memory
	// snapshot, or "": such a snapshot goes with its template, not alone.
	SnapshotHolder(ctx context.Context, tenant *airlock.Tenant, snapshotID string) (string, error)
}

var _ SessionTemplates = (*template.Service)(nil)

// TemplateFromSession makes a template, private to the tenant, of a
// running session: its image's rootfs (read-only in a gVisor sandbox, so
// unchanged) with its workspace as the template's /workspace; with
// IncludeMemory also a memory snapshot every session started from the
// template is restored from and reseeded. The session goes on: without
// memory it is not stopped at all (the workspace is copied as it is, like
// a workspace snapshot); with memory it is saved and restored in place
// like for a memory snapshot, then its workspace copied.
func (m *Manager) TemplateFromSession(ctx context.Context, tenant *airlock.Tenant, id string, req airlock.SessionTemplateRequest) (*airlock.Template, error) {
	if err := req.Validate(); err != nil {
		return nil, err
	}
	st := m.cfg.SessionTemplates
	if st == nil {
		return nil, airlock.Problem(airlock.ENOTIMPLEMENTED, "templates-disabled", "templates are not enabled on this server")
	}
	if req.IncludeMemory {
		if err := m.keepOn(); err != nil {
			return nil, err
		}
	}
	// The session first (another tenant's is not found), then the name.
	l, err := m.lookupLive(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	state, rec := l.rec.State, l.rec
	l.mu.Unlock()
	if state != airlock.SessionReady && state != airlock.SessionBusy {
		return nil, notRunning(&rec)
	}
	if l.sb().WorkspaceDir() == "" {
		return nil, airlock.Problem(airlock.ECONFLICT, template.ProblemSessionTemplate, "the %s backend gives no host access to a workspace; a template is made from a gVisor session", l.lease.BackendName())
	}
	if err := st.CheckName(ctx, tenant, req.Name); err != nil {
		return nil, err
	}
	img, err := m.cfg.Images.Resolve(ctx, rec.Image)
	if err != nil {
		return nil, err
	}
	memID := ""
	if req.IncludeMemory {
		snap, err := m.createMemorySnapshot(ctx, tenant, id, airlock.CreateSnapshotRequest{Name: "template " + req.Name, IncludeMemory: true})
		if err != nil {
			return nil, err
		}
		memID = snap.ID
	}
	l, end, err := m.begin(ctx, tenant, id)
	if err != nil {
		m.dropMemory(ctx, tenant, memID)
		return nil, err
	}
	defer end()
	ws := l.sb().WorkspaceDir()
	t, err := st.CreateFromSession(ctx, tenant, req.Name, template.SessionSource{
		SessionID: id, Image: img, MemorySnapshotID: memID,
		CopyWorkspace: func(ctx context.Context, dir string) error {
			return copyWorkspace(ctx, ws, dir, archiveLimits(rec.Limits))
		},
	})
	if err != nil {
		m.dropMemory(ctx, tenant, memID)
		return nil, err
	}
	return t, nil
}

// dropMemory deletes a memory snapshot taken for a template that was not
// made.
func (m *Manager) dropMemory(ctx context.Context, tenant *airlock.Tenant, id string) {
	if id == "" {
		return
	}
	if err := m.DeleteSnapshot(context.WithoutCancel(ctx), tenant, id); err != nil {
		m.cfg.Logger.Error("delete the memory snapshot of a template not made", "snapshot", id, "err", err)
	}
}

// notRunning is the problem of a session that is not running.
func notRunning(s *airlock.Session) error {
	switch s.State {
	case airlock.SessionPaused:
		return pausedProblem(s.ID)
	case airlock.SessionCreating:
		return airlock.Problem(airlock.ECONFLICT, "session-not-ready", "session %s is still being created", s.ID)
	}
	return ended(s)
}

// templateMemory turns a create request that names a template holding a
// memory snapshot into one restored from that snapshot.
func (m *Manager) templateMemory(ctx context.Context, tenant *airlock.Tenant, req *airlock.CreateSessionRequest) error {
	if req.Template == "" || req.FromSnapshot != "" || m.cfg.Templates == nil {
		return nil
	}
	img, err := m.cfg.Templates.ResolveTemplate(ctx, tenant.ID, req.Template)
	if err != nil || img.MemorySnapshotID == "" {
		return nil // plan resolves it again and answers its problem
	}
	req.FromSnapshot, req.Template = img.MemorySnapshotID, ""
	return nil
}
