package run

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/agent/protocol"
	"github.com/airlockhq/airlock/internal/tracing"
)

// File is put into the sandbox before the program starts.
type File struct {
	Path    string
	Mode    uint32
	Content string
}

// Program is what to run.
type Program struct {
	Argv []string
	Env  []string // KEY=VALUE, added to the image's environment
	Cwd  string   // default /workspace
	// Stdin, when not nil, is written to the program's stdin, which is
	// then closed (unless KeepStdin).
	Stdin []byte
	// KeepStdin gives the program a stdin that stays open for the caller
	// to write through the Process the Started hook is told of.
	KeepStdin bool
	// Timeout is the program's wall time; the agent kills its process
	// group then.
	Timeout time.Duration
	// OutputBytes caps each of stdout and stderr in the record.
	OutputBytes int64
	// MemoryLimitBytes, if set, is the program's RLIMIT_AS.
	MemoryLimitBytes int64
	// Warm hands the program to the sandbox's ready runtime when one
	// matches (one-shot runs).
	Warm bool
	// Retain asks the agent to keep the program's output (up to
	// OutputBytes) and its exit status for a host that reconnects: a
	// program of a session lives through a restart of the server.
	Retain bool
}

// Job is one program run in a held sandbox.
type Job struct {
	Target  Target
	HandIn  []File
	Program Program
	// AttachPID, when set, adopts the program of that PID that the agent
	// kept running (Program.Retain) after the server that started it went
	// away: nothing is handed in or started, the record's creation time
	// is its start, and its output is the agent's copy from the start.
	AttachPID int
	Observer  airlock.ExecObserver
	// Limits are the sandbox's limits: they name what a run ran into
	// and what the watchdog measures against (CPUs).
	Limits airlock.Limits
	// Acquire is recorded as the acquire phase (0: none).
	Acquire time.Duration
	// StopAfter stops the sandbox once the program has ended, before its
	// stats are read and Collect runs: nothing inside can change the
	// workspace any more (one-shot runs).
	StopAfter bool
	// Collect, if set, runs after the program (and the stop) and before
	// the record is written: it may add artifacts to e.
	Collect func(ctx context.Context, e *airlock.Execution) error
	// Started, if set, is told the running program (for signals).
	Started func(pid int, executionID string, p airlock.Process)
	// Ended, when closed, ends the run: the sandbox's owner is gone
	// (ErrEnded). Detached, when closed, leaves the program running and
	// its record open: the server lets go of the sandbox at a clean stop.
	Ended    <-chan struct{}
	Detached <-chan struct{}
}

// outcome is how waiting for a program ended.
type outcome int

const (
	exited     outcome = iota // the agent reported the end (or the wait failed)
	timedOut                  // killed by the host after its timeout
	clientGone                // the caller's context ended
	ownerEnded                // Job.Ended
	detached                  // Job.Detached
)

// Run runs the job's program in its sandbox and finishes e, which Begin
// recorded, with the outcome. A program that fails is a result; an error
// means the run did not happen as asked:
//
//   - a problem sandbox-failed (503): the sandbox or its agent failed;
//     the record says why;
//   - the context's error: the caller went away; the program was killed
//     and the record says so;
//   - ErrEnded: Job.Ended closed; the record says so;
//   - a problem server-restarting (503): Job.Detached closed; the program
//     goes on and its record stays open.
func (r *Runner) Run(ctx context.Context, e *airlock.Execution, job Job) (*airlock.Execution, error) {
	sb := job.Target.Sandbox()
	e.Backend, e.StartSource, e.Accelerator = job.Target.BackendName(), job.Target.StartSource(), job.Target.Accelerator()
	if e.Phases == nil {
		e.Phases = map[string]float64{}
	}
	if job.Acquire > 0 {
		e.Phases[airlock.PhaseAcquire] = msOf(job.Acquire)
	}
	var obsOut, obsErr func([]byte)
	if job.Observer != nil {
		obsOut, obsErr = job.Observer.Stdout, job.Observer.Stderr
	}
	pr := &programRun{r: r, e: e, job: job, sb: sb,
		stdout: newCapture(job.Program.OutputBytes, obsOut), stderr: newCapture(job.Program.OutputBytes, obsErr)}
	r.counted(sb, pr.stdout, pr.stderr)
	if e.SessionID == "" {
		// A session's sandbox is watched for the session's lifetime.
		defer r.cfg.Watchdog.Watch(airlock.Watched{Sandbox: sb, TenantID: e.TenantID, ExecutionID: e.ID, Limits: job.Limits})()
	}
	pr.before = readStats(ctx, sb)
	pr.triedBefore = airlock.NetworkAttempts(ctx, sb)
	if e.SessionID == "" {
		// A one-shot run's last sample before a limit ends it (a
		// session's sandbox is sampled by its session).
		pr.sampler = startSampler(sb, job.Limits.CPUs, sampleEvery)
		defer pr.sampler.Stop()
	}
	if err := pr.execute(ctx); err != nil {
		return e, err
	}
	return e, pr.conclude(ctx)
}

// programRun is one Run: the job, its record, the captures of its output,
// what the sandbox said before the program started, and how the program
// ended.
type programRun struct {
	r              *Runner
	e              *airlock.Execution
	job            Job
	sb             airlock.Sandbox
	stdout, stderr *capture
	before         airlock.Stats
	triedBefore    int64
	sampler        *sampler // one-shot runs only
	last           *airlock.MetricSample

	start       time.Time // when the program started
	status      protocol.ExitStatus
	waitErr     error
	how         outcome
	sandboxGone bool // the sandbox ended under the program
}

// execute hands the program in, starts it, feeds its stdin and waits for
// its end. An error ends the run (the record finished): the program did
// not start, the caller went away, the owner ended or the server let go.
func (pr *programRun) execute(ctx context.Context) error {
	r, e, job, sb := pr.r, pr.e, pr.job, pr.sb
	t := time.Now()
	runCtx, runSpan := tracing.Start(ctx, tracing.SpanRun, attribute.String("airlock.execution", e.ID))
	defer runSpan.End()
	p, start, err := r.start(runCtx, sb, e, job, pr.stdout, pr.stderr)
	if err != nil {
		tracing.Fail(runSpan, err)
		if ctx.Err() != nil {
			r.Fail(ctx, e, fmt.Errorf("the client went away before the program started: %w", ctx.Err()))
			return ctx.Err()
		}
		r.Fail(ctx, e, err)
		return sandboxFailed(e, err)
	}
	pr.start = start
	e.Phases[airlock.PhaseHandIn] = msOf(time.Since(t))
	pid := p.PID()
	if job.Started != nil {
		job.Started(pid, e.ID, p)
	}
	if job.Observer != nil {
		job.Observer.Started(e.ID, pid)
	}
	pr.stdout.start()
	pr.stderr.start()
	if in := job.Program; in.Stdin != nil && job.AttachPID == 0 {
		p.Write(in.Stdin)
		if !in.KeepStdin {
			p.CloseStdin()
		}
	}

	pr.status, pr.waitErr, pr.how = r.wait(ctx, p, start, job)
	if pr.sampler != nil {
		pr.last = pr.sampler.Stop()
	}
	// The agent's connection ended under a running program: if the
	// sandbox is ending too, its first process (the agent) died with it.
	pr.sandboxGone = pr.waitErr != nil && pr.how == exited && r.endsSoon(ctx, sb)
	e.DurationMS = time.Since(start).Milliseconds()
	e.Phases[airlock.PhaseRun] = msOf(time.Since(start))
	runSpan.End()
	switch pr.how {
	case detached:
		return restarting(e)
	case clientGone:
		r.Fail(ctx, e, fmt.Errorf("the client went away; the program was killed: %w", ctx.Err()))
		return ctx.Err()
	case ownerEnded:
		e.EndedBy = r.cfg.Watchdog.KilledBy(sb.ID())
		pr.lastSample()
		r.Fail(ctx, e, ErrEnded)
		return ErrEnded
	}
	return nil
}

// conclude makes the ended program's result: stops the sandbox when the
// job asks, reads its stats, names the exit and the limits it ran into,
// collects artifacts and finishes the record.
func (pr *programRun) conclude(ctx context.Context) error {
	r, e, job, sb := pr.r, pr.e, pr.job, pr.sb
	t := time.Now()
	ctx, collectSpan := tracing.Start(ctx, tracing.SpanCollect, attribute.String("airlock.execution", e.ID))
	defer collectSpan.End()
	if job.StopAfter {
		if err := sb.Stop(ctx); err != nil {
			err = fmt.Errorf("stop sandbox: %w", err)
			r.Fail(ctx, e, err)
			return sandboxFailed(e, err)
		}
	}
	e.HadNetworkAttempt = airlock.NetworkAttempts(ctx, sb) > pr.triedBefore
	st, stErr := sb.Stats(ctx)
	if stErr == nil {
		e.PeakMemoryMB = (st.PeakMemoryBytes + (1<<20 - 1)) >> 20
		e.OOMKilled = st.OOMKilled
	}
	agentKilled, err := pr.exit()
	if err != nil {
		r.Fail(ctx, e, err)
		return sandboxFailed(e, err)
	}
	e.Stdout, e.StdoutTruncated = pr.stdout.result()
	e.Stderr, e.StderrTruncated = pr.stderr.result()
	r.classify(e, sb, pr.before, st, stErr, job.Limits)
	pr.lastSample()
	if job.Collect != nil {
		if err := job.Collect(ctx, e); err != nil {
			err = fmt.Errorf("collect artifacts: %w", err)
			r.Fail(ctx, e, err)
			return sandboxFailed(e, err)
		}
	}
	if job.StopAfter || job.Collect != nil {
		e.Phases[airlock.PhaseCollect] = msOf(time.Since(t))
	}
	e.Status = airlock.StatusCompleted
	if agentKilled {
		e.Status = airlock.StatusFailed
	}
	return r.finish(ctx, e)
}

// exit puts how the program ended in the record: its exit code, or 137
// when it was killed at its deadline, with its sandbox, or with the
// agent. agentKilled says the agent was killed from inside; an error
// that the agent stopped answering while the sandbox lives.
func (pr *programRun) exit() (agentKilled bool, err error) {
	e, sb, status, how := pr.e, pr.sb, pr.status, pr.how
	switch {
	case pr.waitErr == nil:
		e.ExitCode = status.Code
		e.TimedOut = how == timedOut || status.TimedOut
		if status.Error != "" {
			pr.stderr.note("airlock: " + status.Error + "\n")
		}
		if status.StdoutDropped > 0 {
			pr.stdout.markTruncated()
		}
		if status.StderrDropped > 0 {
			pr.stderr.markTruncated()
		}
	case how == timedOut || e.OOMKilled || pr.r.cfg.Watchdog.KilledBy(sb.ID()) != "":
		// Killed at the deadline, or the whole sandbox died (out of
		// memory, or a detector killed it): like a shell, report a
		// SIGKILL as 128+9.
		e.ExitCode = 137
		e.TimedOut = how == timedOut
	case pr.sandboxGone || ended(sb):
		// No limit and no detector: the agent, the sandbox's first
		// process, was killed from inside (kill -9 1 runs as its user)
		// and the sandbox ended with it. That is what the code did, so
		// it is the run's result, not a failure to retry.
		e.ExitCode = 137
		e.EndedBy = airlock.EndedAgentKilled
		e.Error = "the sandbox's agent (its first process) was killed while the program ran, and the sandbox ended with it"
		pr.stderr.note("airlock: the sandbox's agent was killed while the program ran; the sandbox is gone\n")
		return true, nil
	default:
		// The agent stopped answering while the sandbox lives.
		return false, fmt.Errorf("the agent stopped answering while the program ran: %w", pr.waitErr)
	}
	return false, nil
}

// start hands the job's files in and starts its program (or attaches to
// the one it adopts), and returns the program and when it started.
func (r *Runner) start(ctx context.Context, sb airlock.Sandbox, e *airlock.Execution, job Job, stdout, stderr *capture) (airlock.Process, time.Time, error) {
	agent := sb.Agent()
	pr := job.Program
	if job.AttachPID > 0 {
		p, err := agent.Attach(ctx, job.AttachPID, stdout, stderr)
		if err != nil {
			return nil, time.Time{}, fmt.Errorf("attach to the running program: %w", err)
		}
		return p, e.CreatedAt, nil
	}
	// Small files go in with the exec (one round trip); larger ones are
	// put first.
	var inline []protocol.InlineFile
	size := 0
	for _, f := range job.HandIn {
		size += len(f.Content)
	}
	if len(job.HandIn) <= protocol.MaxInlineFiles && size <= protocol.MaxInlineBytes {
		for _, f := range job.HandIn {
			inline = append(inline, protocol.InlineFile{Path: f.Path, Mode: f.Mode, Data: []byte(f.Content)})
		}
	} else {
		for _, f := range job.HandIn {
			if _, err := agent.Put(ctx, f.Path, f.Mode, strings.NewReader(f.Content)); err != nil {
				return nil, time.Time{}, fmt.Errorf("hand in %s: %w", f.Path, err)
			}
		}
	}
	req := protocol.ExecRequest{
		Files:            inline,
		Argv:             pr.Argv,
		Env:              pr.Env,
		Cwd:              pr.Cwd,
		Stdin:            pr.Stdin != nil || pr.KeepStdin,
		TimeoutMS:        pr.Timeout.Milliseconds(),
		Warm:             pr.Warm,
		MemoryLimitBytes: pr.MemoryLimitBytes,
	}
	if pr.Retain {
		req.Tag = e.ID // how the program is found again after a restart
		req.RetainBytes = min(pr.OutputBytes, protocol.MaxRetainBytes)
	}
	start := time.Now()
	p, err := agent.Exec(ctx, req, stdout, stderr)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("start program: %w", err)
	}
	return p, start, nil
}

// wait waits for a program to end under the job's deadline. The agent
// kills the program's group at its timeout; if it has not reported the
// end KillGrace later, the host sends SIGKILL to the group itself and
// waits KillGrace more (not when the sandbox is stopped next anyway).
func (r *Runner) wait(ctx context.Context, p airlock.Process, start time.Time, job Job) (protocol.ExitStatus, error, outcome) {
	left := time.Until(start.Add(job.Program.Timeout + r.cfg.KillGrace))
	deadline := time.NewTimer(max(left, 0))
	defer deadline.Stop()
	select {
	case <-p.Done():
		st, err := p.Wait(ctx)
		if err != nil && closed(job.Detached) {
			return st, err, detached
		}
		return st, err, exited
	case <-deadline.C:
		p.Signal(int(syscall.SIGKILL))
		if job.StopAfter {
			return protocol.ExitStatus{}, errors.New("the program did not end at its timeout"), timedOut
		}
		grace := time.NewTimer(r.cfg.KillGrace)
		defer grace.Stop()
		select {
		case <-p.Done():
			st, err := p.Wait(ctx)
			return st, err, timedOut
		case <-grace.C:
			return protocol.ExitStatus{}, errors.New("the program did not end after its timeout and a SIGKILL"), timedOut
		}
	case <-ctx.Done():
		p.Signal(int(syscall.SIGKILL))
		return protocol.ExitStatus{}, ctx.Err(), clientGone
	case <-job.Ended:
		return protocol.ExitStatus{}, ErrEnded, ownerEnded
	case <-job.Detached:
		return protocol.ExitStatus{}, nil, detached
	}
}

// ended reports whether the sandbox has exited on its own.
func ended(sb airlock.Sandbox) bool { return closed(sb.Done()) }

// endsSoon reports whether the sandbox exits within KillGrace: the
// agent's connection closes the moment the agent dies, a moment before
// the backend sees its sandbox end.
func (r *Runner) endsSoon(ctx context.Context, sb airlock.Sandbox) bool {
	t := time.NewTimer(r.cfg.KillGrace)
	defer t.Stop()
	select {
	case <-sb.Done():
		return true
	case <-t.C:
		return false
	case <-ctx.Done():
		return ended(sb)
	}
}

// lastSample puts the run's last sample in a record that a limit ended.
func (pr *programRun) lastSample() {
	if pr.e.EndedBy != "" && pr.e.EndedBy != airlock.EndedAgentKilled {
		pr.e.LastSample = pr.last
	}
}
