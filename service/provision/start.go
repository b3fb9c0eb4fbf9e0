package provision

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/airlockhq/airlock"
)

// StartTag is the tag of a template's start_cmd among the sandbox's
// retained programs (airlock.AgentRunner.Processes lists it).
const StartTag = "template-start"

// ErrNotReady: a template's ready_cmd did not succeed in time, or its
// start_cmd ended before it did.
var ErrNotReady = errors.New("template did not become ready")

// StartSpec is what runs in every sandbox of a template before it is
// handed out (and before its base snapshot is taken).
type StartSpec struct {
	// StartCmd is started with /bin/sh -c and left running, retained by
	// the agent so that it outlives the host's connection; "" for none.
	StartCmd string
	// ReadyCmd is run with /bin/sh -c every Interval until it exits 0;
	// "" means ready once StartCmd has started.
	ReadyCmd string
	Env      []string // added to the agent's environment
	Cwd      string   // default the agent's (/workspace)
	// Timeout bounds the wait for ReadyCmd (default 60 s); Interval is
	// the pause between tries (default 200 ms).
	Timeout  time.Duration
	Interval time.Duration
	// Log, if set, receives StartCmd's and ReadyCmd's output.
	Log io.Writer
}

// startRetainBytes is how much of start_cmd's output the agent keeps.
const startRetainBytes = 64 << 10

// Start starts spec.StartCmd in a sandbox and waits until spec.ReadyCmd
// succeeds. It fails with ErrNotReady when the ready command has not
// succeeded within the timeout, or the start command exited first.
func Start(ctx context.Context, agent airlock.AgentRunner, spec StartSpec) error {
	if spec.Timeout <= 0 {
		spec.Timeout = 60 * time.Second
	}
	if spec.Interval <= 0 {
		spec.Interval = 200 * time.Millisecond
	}
	var started airlock.Process
	if spec.StartCmd != "" {
		p, err := agent.Exec(context.WithoutCancel(ctx), airlock.ExecRequest{
			Argv: []string{"/bin/sh", "-c", spec.StartCmd}, Env: spec.Env, Cwd: spec.Cwd,
			RetainBytes: startRetainBytes, Tag: StartTag,
		}, spec.Log, spec.Log)
		if err != nil {
			return fmt.Errorf("start_cmd: %w", err)
		}
		started = p
	}
	if spec.ReadyCmd == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, spec.Timeout)
	defer cancel()
	var last string
	for {
		if started != nil {
			select {
			case <-started.Done():
				st, _ := started.Wait(context.WithoutCancel(ctx))
				return fmt.Errorf("%w: start_cmd exited (code %d) before ready_cmd succeeded", ErrNotReady, st.Code)
			default:
			}
		}
		p, err := agent.Exec(ctx, airlock.ExecRequest{
			Argv: []string{"/bin/sh", "-c", spec.ReadyCmd}, Env: spec.Env, Cwd: spec.Cwd,
			TimeoutMS: spec.Timeout.Milliseconds(),
		}, nil, nil)
		if err == nil {
			st, werr := p.Wait(ctx)
			if werr == nil && st.Code == 0 && st.Error == "" {
				return nil
			}
			last = fmt.Sprintf("exit code %d", st.Code)
			if werr != nil {
				last = werr.Error()
			}
		} else {
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: ready_cmd did not succeed within %s (last: %s)", ErrNotReady, spec.Timeout, last)
		case <-time.After(spec.Interval):
		}
	}
}

// startImage runs the image's start_cmd and waits for its ready_cmd in a
// sandbox just booted (restored sandboxes carry it from their snapshot);
// on failure the sandbox is destroyed.
func startImage(ctx context.Context, sb airlock.Sandbox, img *airlock.Image) error {
	if img == nil || (img.StartCmd == "" && img.ReadyCmd == "") {
		return nil
	}
	if err := Start(ctx, sb.Agent(), StartSpec{StartCmd: img.StartCmd, ReadyCmd: img.ReadyCmd}); err != nil {
		sb.Destroy(context.WithoutCancel(ctx))
		return &airlock.Error{Code: airlock.EUNAVAILABLE, Type: "template-start-failed", Message: "the template's start_cmd or ready_cmd failed", Err: err}
	}
	return nil
}
