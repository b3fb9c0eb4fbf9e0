package oneshot

import (
	"context"
	"errors"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/tracing"
	"github.com/airlockhq/airlock/service/provision"
	"github.com/airlockhq/airlock/service/run"
)

// Execute runs req in a fresh sandbox and returns the recorded result: a
// program that fails is a result; an error means the service failed (or
// refused). The steps: guard, admit, record, acquire, hand in and run, stop,
// collect, record, release (the sandbox is destroyed after the response).
func (m *Manager) Execute(ctx context.Context, tenant *airlock.Tenant, agentID string, req airlock.ExecuteRequest) (*airlock.Execution, error) {
	if err := req.Validate(m.cfg.MaxTimeout); err != nil {
		return nil, err
	}
	allow, err := m.allowList(tenant, req)
	if err != nil {
		return nil, err
	}
	img, err := airlock.ResolveRequestImage(ctx, m.cfg.Images, m.cfg.Templates, tenant.ID, req.Image, req.Template, m.cfg.DefaultImages[req.Language])
	if err != nil {
		return nil, err
	}
	limits := m.cfg.Limits
	if req.TimeoutSec > 0 {
		limits.Timeout = time.Duration(req.TimeoutSec) * time.Second
	}

	// The guard first: code it refuses takes no admission and no sandbox.
	rec, err := m.cfg.Runner.Screen(ctx, run.Record{
		TenantID: tenant.ID, AgentID: agentID, Language: req.Language, Image: img.Name,
		Code: req.Code, Guard: tenant.Guard,
	})
	if err != nil {
		return nil, err
	}
	tracing.Place(ctx, tracing.LocalNode) // one node: this one; a fleet places before it forwards
	ticket, err := m.cfg.Provisioner.Admit(ctx, provision.Claim{
		Kind: provision.OneShot, Tenant: tenant, Isolation: req.Isolation, Network: req.AllowNetwork,
		Limits: limits, Deadline: time.Now().Add(limits.Timeout),
	})
	if err != nil {
		return nil, err
	}
	rec.Backend = ticket.Backend().Name()
	e, err := m.cfg.Runner.Begin(ctx, rec)
	if err != nil {
		ticket.Cancel()
		return nil, err
	}
	spec := provision.Spec{
		ID: "ex-" + e.ID, Image: img, Language: req.Language, Flavour: m.flavour(ctx, img, req, rec), Limits: limits,
		Labels: map[string]string{"airlock.execution": e.ID, "airlock.tenant": tenant.ID},
	}
	if req.AllowNetwork {
		spec.Network = &airlock.NetworkRequest{
			TenantID: tenant.ID, ExecutionID: e.ID,
			Policy: airlock.NetworkPolicy{Mode: airlock.NetworkAllowList, Allow: allow},
		}
	}
	lease, err := ticket.Acquire(ctx, spec)
	if err != nil {
		m.cfg.Logger.ErrorContext(ctx, "execution failed: no sandbox", "execution", e.ID, "err", err)
		m.cfg.Runner.Fail(ctx, e, err)
		var ae *airlock.Error
		if errors.As(err, &ae) || errors.Is(err, context.Canceled) {
			return nil, err
		}
		return nil, &airlock.Error{Code: airlock.EUNAVAILABLE, Type: run.ProblemSandboxFailed,
			Message: "the sandbox could not be made; the execution is recorded as failed (execution " + e.ID + ")", Err: err}
	}
	before := snapshotDir(lease.Sandbox().WorkspaceDir())
	file, argv := program(req.Language)
	e, err = m.cfg.Runner.Run(ctx, e, run.Job{
		Target:  lease,
		Limits:  limits,
		Acquire: lease.AcquireTime(),
		HandIn:  []run.File{{Path: file, Mode: 0o644, Content: req.Code}},
		Program: run.Program{
			Argv: argv, Env: provision.ProgramEnv, Cwd: "/workspace",
			Timeout: limits.Timeout, OutputBytes: limits.OutputBytes, Warm: true,
		},
		StopAfter: true,
		Collect: func(ctx context.Context, e *airlock.Execution) error {
			arts, truncated, err := m.collect(ctx, e, lease.Sandbox().WorkspaceDir(), before)
			e.Artifacts, e.ArtifactsTruncated = arts, truncated
			return err
		},
	})
	// Every process of the sandbox has ended and its files are collected:
	// the caller need not wait for the rest of its end.
	lease.Release(func(d time.Duration) { m.cfg.Runner.RecordPhase(e, airlock.PhaseDestroy, d) })
	if err != nil {
		m.cfg.Logger.ErrorContext(ctx, "execution failed", "execution", e.ID, "err", err)
		return nil, err
	}
	return e, nil
}

// allowList returns the allow list of an execution that asks for a
// network (the tenant's default, operator config), or refuses it.
func (m *Manager) allowList(t *airlock.Tenant, req airlock.ExecuteRequest) ([]string, error) {
	if !req.AllowNetwork {
		return nil, nil
	}
	var allow []string
	if m.cfg.NetworkAllow != nil {
		allow = m.cfg.NetworkAllow(t)
	}
	if len(allow) == 0 {
		return nil, airlock.Problem(airlock.EFORBIDDEN, "network-unavailable",
			"allow_network: tenant %s has no default allow list; the operator sets one (airlockd --network-allow %s=host,...)", t.Name, t.Name)
	}
	return allow, nil
}
