package run

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/agent/protocol"
)

// Cell is one cell run in a code context of a held sandbox.
type Cell struct {
	Target      Target
	ContextID   string
	Code        string
	Timeout     time.Duration
	OutputBytes int64 // per stream
	Observer    airlock.CellObserver
	Limits      airlock.Limits // the sandbox's, as in Job
	// Ended and Detached as in Job.
	Ended    <-chan struct{}
	Detached <-chan struct{}
}

// ErrCellStuck means a cell did not end CellSlack after its timeout.
var ErrCellStuck = errors.New("run: the cell did not end after its timeout")

// RunCell runs a cell and finishes e, which Begin recorded (its stdout
// and stderr, capped, are the cell's): a cell that
// raises is a result (exit code 1 in the record), one that times out or
// whose interpreter dies too (exit code 137). The returned error is the
// agent's refusal (a *protocol.RemoteError, for the caller to map),
// ErrCellStuck, the context's error, ErrEnded, a problem
// server-restarting (Detached: the record stays open) or sandbox-failed.
func (r *Runner) RunCell(ctx context.Context, e *airlock.Execution, c Cell) (*protocol.CellResult, error) {
	sb := c.Target.Sandbox()
	e.Backend, e.StartSource, e.Accelerator = c.Target.BackendName(), c.Target.StartSource(), c.Target.Accelerator()
	if e.Phases == nil {
		e.Phases = map[string]float64{}
	}
	var obsOut, obsErr func([]byte)
	if c.Observer != nil {
		obsOut, obsErr = c.Observer.Stdout, c.Observer.Stderr
		c.Observer.Started(c.ContextID)
	}
	stdout, stderr := newCapture(c.OutputBytes, obsOut), newCapture(c.OutputBytes, obsErr)
	r.counted(sb, stdout, stderr)
	before := readStats(ctx, sb)
	stdout.start() // Started was said above
	stderr.start()
	rctx, cancel := context.WithTimeout(ctx, c.Timeout+r.cfg.CellSlack)
	defer cancel()
	type answer struct {
		res *protocol.CellResult
		err error
	}
	done := make(chan answer, 1)
	start := time.Now()
	go func() {
		res, err := sb.Agent().RunCell(rctx, c.ContextID, c.Code, c.Timeout.Milliseconds(), stdout, stderr)
		done <- answer{res, err}
	}()
	var a answer
	select {
	case a = <-done:
	case <-c.Ended:
		cancel()
		e.EndedBy = r.cfg.Watchdog.KilledBy(sb.ID())
		r.Fail(ctx, e, ErrEnded)
		return nil, ErrEnded
	case <-c.Detached:
		cancel()
		return nil, restarting(e)
	}
	e.DurationMS = time.Since(start).Milliseconds()
	e.Phases[airlock.PhaseRun] = msOf(time.Since(start))
	if a.err != nil {
		var re *protocol.RemoteError
		switch {
		case closed(c.Detached):
			return nil, restarting(e)
		case ctx.Err() != nil:
			r.Fail(ctx, e, fmt.Errorf("the client went away; the cell was interrupted: %w", ctx.Err()))
			return nil, ctx.Err()
		case rctx.Err() != nil:
			r.Fail(ctx, e, ErrCellStuck)
			return nil, ErrCellStuck
		case errors.As(a.err, &re):
			r.Fail(ctx, e, a.err)
			return nil, a.err
		case r.endsSoon(ctx, sb) && r.cfg.Watchdog.KilledBy(sb.ID()) == "":
			// The agent died and took the sandbox with it while the
			// cell ran (see Run): the cell's result, not a failure.
			return r.agentKilledCell(ctx, e, sb, c, before, stdout, stderr)
		}
		r.Fail(ctx, e, a.err)
		return nil, sandboxFailed(e, a.err)
	}
	res := a.res
	st, stErr := sb.Stats(ctx)
	if stErr == nil {
		e.PeakMemoryMB = (st.PeakMemoryBytes + (1<<20 - 1)) >> 20
		e.OOMKilled = st.OOMKilled
	}
	e.TimedOut = res.TimedOut
	switch {
	case res.Died || res.TimedOut:
		e.ExitCode = 137
	case res.Error != nil:
		e.ExitCode = 1
	}
	e.Stdout, e.StdoutTruncated = stdout.result()
	e.Stderr, e.StderrTruncated = stderr.result()
	r.classify(e, sb, before, st, stErr, c.Limits)
	e.Status = airlock.StatusCompleted
	if err := r.finish(ctx, e); err != nil {
		return nil, err
	}
	return res, nil
}

// agentKilledCell finishes the record of a cell during which the
// sandbox's agent was killed and the sandbox ended: exit code 137,
// status failed, EndedBy EndedAgentKilled, and a dead context. Out of
// memory is named as such.
func (r *Runner) agentKilledCell(ctx context.Context, e *airlock.Execution, sb airlock.Sandbox, c Cell, before airlock.Stats, stdout, stderr *capture) (*protocol.CellResult, error) {
	st, stErr := sb.Stats(ctx)
	if stErr == nil {
		e.PeakMemoryMB = (st.PeakMemoryBytes + (1<<20 - 1)) >> 20
		e.OOMKilled = st.OOMKilled
	}
	e.ExitCode = 137
	stderr.note("airlock: the sandbox's agent was killed while the cell ran; the sandbox is gone\n")
	e.Stdout, e.StdoutTruncated = stdout.result()
	e.Stderr, e.StderrTruncated = stderr.result()
	r.classify(e, sb, before, st, stErr, c.Limits)
	e.Status = airlock.StatusCompleted
	if e.EndedBy == "" {
		e.EndedBy = airlock.EndedAgentKilled
		e.Status = airlock.StatusFailed
		e.Error = "the sandbox's agent (its first process) was killed while the cell ran, and the sandbox ended with it"
	}
	if err := r.finish(ctx, e); err != nil {
		return nil, err
	}
	return &protocol.CellResult{Died: true, DurationMS: e.DurationMS}, nil
}

// CellSlack is how long past a cell's timeout the runner waits for it.
func (r *Runner) CellSlack() time.Duration { return r.cfg.CellSlack }
