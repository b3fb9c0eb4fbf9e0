package run

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/tracing"
)

// Target is a sandbox the caller holds (a provision.Lease).
type Target interface {
	Sandbox() airlock.Sandbox
	BackendName() string
	// Accelerator is a microVM backend's "kvm" or "tcg", "" otherwise.
	Accelerator() string
	StartSource() string
}

// Runner runs programs and cells in sandboxes and records them. It is
// safe for concurrent use.
type Runner struct {
	cfg     Config
	metrics *metrics
}

// New returns a runner.
func New(cfg Config) (*Runner, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Runner{cfg: cfg, metrics: newMetrics(cfg.Metrics)}, nil
}

// Watchdog is the node's abuse monitor the runner reports to.
func (r *Runner) Watchdog() airlock.Watchdog { return r.cfg.Watchdog }

// Record says what a run is, for its execution row.
type Record struct {
	TenantID  string
	SessionID string // "" for a one-shot run
	AgentID   string
	Language  airlock.Language
	Image     string
	Code      string // only its SHA-256 is recorded
	// Argv is the command of language airlock.Command, which Code joins
	// with NULs: the guard checks it as an argv.
	Argv    []string
	Backend string
	// Guard is the tenant's guard policy ("" is warn).
	Guard airlock.GuardPolicy

	screened *screening // set by Screen
}

// Begin records a run about to start (status running) and returns its
// execution, whose ID names the run from now on. A record that Screen
// did not see is screened first: the guard's refusal is Begin's error,
// and its findings are the execution's.
func (r *Runner) Begin(ctx context.Context, rec Record) (*airlock.Execution, error) {
	rec, err := r.Screen(ctx, rec)
	if err != nil {
		return nil, err
	}
	e := r.newExecution(ctx, rec)
	if err := r.cfg.Store.CreateExecution(ctx, e); err != nil {
		return nil, fmt.Errorf("run: record execution: %w", err)
	}
	return e, nil
}

// newExecution is the record of a run about to start, in the trace of
// ctx's span (if any).
func (r *Runner) newExecution(ctx context.Context, rec Record) *airlock.Execution {
	sum := sha256.Sum256([]byte(rec.Code))
	findings := []airlock.GuardFinding{}
	if rec.screened != nil {
		findings = rec.screened.findings
	}
	return &airlock.Execution{
		ID:         r.cfg.NewID(),
		TenantID:   rec.TenantID,
		SessionID:  rec.SessionID,
		AgentID:    rec.AgentID,
		Language:   rec.Language,
		Image:      rec.Image,
		CodeSHA256: hex.EncodeToString(sum[:]),
		Status:     airlock.StatusRunning,
		Backend:    rec.Backend,
		Artifacts:  []airlock.Artifact{},
		Phases:     map[string]float64{},
		Findings:   findings,
		CreatedAt:  r.cfg.Now().UTC(),
		TraceID:    tracing.TraceID(ctx),
	}
}

// Fail ends the record of a run that could not run, with why.
func (r *Runner) Fail(ctx context.Context, e *airlock.Execution, cause error) error {
	e.Status = airlock.StatusFailed
	e.Error = cause.Error()
	return r.finish(ctx, e)
}

// finish writes the outcome of e (finished now) and counts it. A busy
// store is tried again for up to StoreRetry: the run happened, and its
// record must not be lost to a lock held for a while.
func (r *Runner) finish(ctx context.Context, e *airlock.Execution) error {
	finished := r.cfg.Now().UTC()
	e.FinishedAt = &finished
	if e.Artifacts == nil {
		e.Artifacts = []airlock.Artifact{}
	}
	r.metrics.executions.WithLabelValues(string(e.Language), e.StartSource, string(e.Status)).Inc()
	for phase, ms := range e.Phases {
		r.metrics.phase.WithLabelValues(phase, e.StartSource).Observe(ms / 1000)
	}
	ctx = context.WithoutCancel(ctx) // the record is written even if the client went away
	deadline := time.Now().Add(r.cfg.StoreRetry)
	for wait := 100 * time.Millisecond; ; wait = min(2*wait, 2*time.Second) {
		err := r.cfg.Store.FinishExecution(ctx, e)
		if err == nil || airlock.ErrorCode(err) != airlock.EUNAVAILABLE || time.Now().Add(wait).After(deadline) {
			if err != nil {
				return fmt.Errorf("run: record the result of execution %s: %w", e.ID, err)
			}
			return nil
		}
		r.cfg.Logger.Warn("the store is busy; trying again to record a result", "execution", e.ID, "err", err)
		time.Sleep(wait)
	}
}

// RecordPhase adds one phase's time to a finished execution (the destroy
// phase ends after the response was sent) and to the phase histogram.
func (r *Runner) RecordPhase(e *airlock.Execution, phase string, d time.Duration) {
	ms := msOf(d)
	r.metrics.phase.WithLabelValues(phase, e.StartSource).Observe(d.Seconds())
	if err := r.cfg.Store.RecordPhase(context.Background(), e.TenantID, e.ID, phase, ms); err != nil {
		r.cfg.Logger.Warn("record phase", "execution", e.ID, "phase", phase, "err", err)
	}
}

func msOf(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// Errors a run returns besides problems for the client.
var (
	// ErrEnded: the owner of the sandbox (a session) ended while the
	// program ran. Ended closes it.
	ErrEnded = errors.New("run: the sandbox's owner ended while the program ran")
)

// Problem types of runs.
const (
	ProblemSandboxFailed    = "sandbox-failed"
	ProblemServerRestarting = "server-restarting"
)

// sandboxFailed is the client's error for a run whose sandbox failed.
func sandboxFailed(e *airlock.Execution, err error) error {
	return &airlock.Error{Code: airlock.EUNAVAILABLE, Type: ProblemSandboxFailed,
		Message: "the sandbox failed; the execution is recorded as failed (execution " + e.ID + ")", Err: err}
}

// restarting is the client's error for a run left running at a clean
// stop of the server.
func restarting(e *airlock.Execution) error {
	return airlock.Problem(airlock.EUNAVAILABLE, ProblemServerRestarting,
		"the server is restarting; the program goes on running in the session and the next start records its result (execution %s)", e.ID).RetryLater(5 * time.Second)
}

func closed(c <-chan struct{}) bool {
	if c == nil {
		return false
	}
	select {
	case <-c:
		return true
	default:
		return false
	}
}
