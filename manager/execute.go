package manager

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/protocol"
)

// killGrace is how long past the deadline the host waits for the agent to
// report the kill it does itself, before it ends the sandbox.
const killGrace = 2 * time.Second

// Execute runs req in a fresh sandbox and returns the recorded result. A
// program that fails is a result; an error means the service failed.
func (m *Manager) Execute(ctx context.Context, tenant *airlock.Tenant, agentID string, req airlock.ExecuteRequest) (*airlock.Execution, error) {
	if err := req.Validate(m.cfg.MaxTimeout); err != nil {
		return nil, err
	}
	backend, err := m.backendFor(tenant, req.Isolation)
	if err != nil {
		return nil, err
	}
	if err := m.checkNetwork(tenant, backend, req); err != nil {
		return nil, err
	}
	imageName := req.Image
	if imageName == "" {
		imageName = m.cfg.DefaultImages[req.Language]
	}
	img, err := m.cfg.Images.Resolve(ctx, imageName)
	if err != nil {
		return nil, err
	}
	limits := m.cfg.Limits
	if req.TimeoutSec > 0 {
		limits.Timeout = time.Duration(req.TimeoutSec) * time.Second
	}
	if err := m.acquire(ctx); err != nil {
		return nil, err
	}
	defer m.release()

	sum := sha256.Sum256([]byte(req.Code))
	e := &airlock.Execution{
		ID:         m.cfg.NewID(),
		TenantID:   tenant.ID,
		AgentID:    agentID,
		Language:   req.Language,
		Image:      img.Name,
		CodeSHA256: hex.EncodeToString(sum[:]),
		Status:     airlock.StatusRunning,
		Artifacts:  []airlock.Artifact{},
		Phases:     map[string]float64{},
		CreatedAt:  m.cfg.Now().UTC(),
	}
	e.Backend = backend.Name()
	if err := m.cfg.Store.CreateExecution(ctx, e); err != nil {
		return nil, fmt.Errorf("manager: record execution: %w", err)
	}
	sb, runErr := m.run(ctx, backend, e, img, req, limits)
	finished := m.cfg.Now().UTC()
	e.FinishedAt = &finished
	if runErr != nil {
		e.Status = airlock.StatusFailed
		e.Error = runErr.Error()
		m.cfg.Logger.Error("execution failed", "execution", e.ID, "err", runErr)
	} else {
		e.Status = airlock.StatusCompleted
	}
	m.metrics.executions.WithLabelValues(string(e.Language), e.StartSource, string(e.Status)).Inc()
	for phase, ms := range e.Phases {
		m.metrics.phase.WithLabelValues(phase, e.StartSource).Observe(ms / 1000)
	}
	// The record is written even if the client went away.
	if err := m.cfg.Store.FinishExecution(context.WithoutCancel(ctx), e); err != nil {
		if sb != nil {
			m.destroyLater(sb)
		}
		return nil, fmt.Errorf("manager: record result: %w", err)
	}
	if sb != nil {
		// Every process of the sandbox has ended and its files are
		// collected: the caller need not wait for the rest of its end.
		m.destroyAndRecord(sb, e)
	}
	if runErr != nil {
		if errors.Is(runErr, context.Canceled) {
			return nil, runErr
		}
		return nil, &airlock.Error{Code: airlock.EUNAVAILABLE, Type: "sandbox-failed", Message: "the sandbox failed; the execution is recorded as failed (execution " + e.ID + ")", Err: runErr}
	}
	return e, nil
}

// destroyAndRecord destroys a used sandbox in the background and adds the
// time it took to the execution's record.
func (m *Manager) destroyAndRecord(sb airlock.Sandbox, e *airlock.Execution) {
	m.bg.Add(1)
	go func() {
		defer m.bg.Done()
		start := time.Now()
		if err := sb.Destroy(context.Background()); err != nil {
			m.cfg.Logger.Error("destroy sandbox", "sandbox", sb.ID(), "err", err)
			return
		}
		ms := msSince(start)
		m.metrics.phase.WithLabelValues(airlock.PhaseDestroy, e.StartSource).Observe(ms / 1000)
		if err := m.cfg.Store.RecordPhase(context.Background(), e.TenantID, e.ID, airlock.PhaseDestroy, ms); err != nil {
			m.cfg.Logger.Warn("record destroy time", "execution", e.ID, "err", err)
		}
	}()
}

func msSince(t time.Time) float64 {
	return float64(time.Since(t).Microseconds()) / 1000
}

// run does the sandbox part of an execution and fills e with the result.
// It returns the sandbox, stopped, for the caller to destroy (nil if none
// was obtained or it is already destroyed).
func (m *Manager) run(ctx context.Context, backend airlock.Backend, e *airlock.Execution, img *airlock.Image, req airlock.ExecuteRequest, limits airlock.Limits) (airlock.Sandbox, error) {
	t := time.Now()
	k := m.keyFor(img, req.Language)
	sb, source, err := m.sandboxWithNetwork(ctx, backend, k, e, req, map[string]string{"airlock.execution": e.ID, "airlock.tenant": e.TenantID})
	if err != nil {
		return nil, err
	}
	e.StartSource = source
	e.Phases[airlock.PhaseAcquire] = msSince(t)

	t = time.Now()
	agent := sb.Agent()
	file, argv := program(req.Language)
	if _, err := agent.Put(ctx, file, 0o644, strings.NewReader(req.Code)); err != nil {
		return sb, fmt.Errorf("hand in code: %w", err)
	}
	before := snapshotDir(sb.WorkspaceDir())
	stdout := newCappedBuffer(limits.OutputBytes)
	stderr := newCappedBuffer(limits.OutputBytes)
	start := time.Now()
	p, err := agent.Exec(ctx, protocol.ExecRequest{
		Argv:      argv,
		Env:       programEnv,
		Cwd:       "/workspace",
		TimeoutMS: limits.Timeout.Milliseconds(),
		Warm:      true,
	}, stdout, stderr)
	if err != nil {
		return sb, fmt.Errorf("start program: %w", err)
	}
	e.Phases[airlock.PhaseHandIn] = msSince(t)

	deadline := time.NewTimer(limits.Timeout + killGrace)
	defer deadline.Stop()
	var status protocol.ExitStatus
	var waitErr error
	select {
	case <-p.Done():
		status, waitErr = p.Wait(ctx)
	case <-deadline.C:
		e.TimedOut = true
		waitErr = errors.New("deadline passed")
	case <-ctx.Done():
		return sb, ctx.Err()
	}
	e.DurationMS = time.Since(start).Milliseconds()
	e.Phases[airlock.PhaseRun] = msSince(start)

	t = time.Now()
	if err := sb.Stop(ctx); err != nil {
		return sb, fmt.Errorf("stop sandbox: %w", err)
	}
	e.HadNetworkAttempt = airlock.NetworkAttempts(ctx, sb) > 0
	if st, err := sb.Stats(ctx); err == nil {
		e.PeakMemoryMB = (st.PeakMemoryBytes + (1<<20 - 1)) >> 20
		e.OOMKilled = st.OOMKilled
	}
	switch {
	case waitErr == nil:
		e.ExitCode = status.Code
		e.TimedOut = e.TimedOut || status.TimedOut
		if status.Error != "" {
			stderr.Write([]byte("airlock: " + status.Error + "\n"))
		}
	default:
		// The program did not report an end: killed at the deadline, or
		// the whole sandbox died (out of memory). Like a shell, report a
		// SIGKILL as 128+9.
		e.ExitCode = 137
		if !e.TimedOut && !e.OOMKilled {
			m.cfg.Logger.Warn("sandbox ended without an exit status", "execution", e.ID, "err", waitErr)
		}
	}
	e.Stdout, e.StdoutTruncated = stdout.result()
	e.Stderr, e.StderrTruncated = stderr.result()
	arts, truncated, err := m.collect(ctx, e, sb.WorkspaceDir(), before)
	if err != nil {
		return sb, fmt.Errorf("collect artifacts: %w", err)
	}
	e.Artifacts = arts
	if e.Artifacts == nil {
		e.Artifacts = []airlock.Artifact{}
	}
	e.ArtifactsTruncated = truncated
	e.Phases[airlock.PhaseCollect] = msSince(t)
	return sb, nil
}
