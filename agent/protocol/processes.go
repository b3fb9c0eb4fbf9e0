package protocol

import (
	"context"
	"fmt"
	"io"
	"math"

	"github.com/airlockhq/airlock"
)

// Retained programs: an exec with RetainBytes outlives the connection it
// was started on. The agent keeps the first RetainBytes of its stdout and
// of its stderr and, once it ends, its exit status. OpProcesses lists the
// retained programs that are running or whose exit no host has received
// yet; OpAttach reads one again: the agent answers like an exec start
// (a Response with the PID), sends the retained output from the beginning
// (stdout, then stderr), then the live output, then TExit. TSignal frames
// on the attach stream signal the program's process group. Attaching a
// program that another stream reads takes it over (the other stream ends
// with a TError "attached_elsewhere"). Once its TExit has been sent on any
// stream, the agent forgets the program.
//
// A program on a terminal (ExecRequest.PTY) keeps the last RetainBytes
// of its output instead of the first, as a terminal's scrollback, and
// its terminal stays open while no host reads it. An attach may give an
// Offset, the count of stdout bytes the host holds already: the agent
// sends only what follows (from the oldest byte it still holds, which
// Response.Offset names). An attach with Stdin takes the terminal's
// input and size as the exec's own stream did (TStdin, TResize); it is
// refused for a program without a terminal. OpDetach makes the agent
// stop sending a retained program on the stream of this connection that
// reads it: the program runs on, keeping its output, for an attach. A
// host detaches its terminals before the sandbox is checkpointed, so
// that after the restore no stream of the old connection is still fed.
const (
	MaxRetainBytes = 16 << 20 // ExecRequest.RetainBytes, per stream
	MaxRetained    = 64       // ended programs kept unreported; the oldest go first
	MaxProcessList = 1024     // entries of one processes response
)

// ProcessInfo is the domain's; see messages.go.
type ProcessInfo = airlock.ProcessInfo

// validateProcess checks a process entry from the agent; an over-long
// argv0 (at most MaxNameBytes) is cut.
func validateProcess(p *ProcessInfo) error {
	if !validPID(p.PID) {
		return fmt.Errorf("bad pid %d", p.PID)
	}
	if p.StartedAtMS < 0 || p.TimeoutMS < 0 {
		return fmt.Errorf("negative value")
	}
	p.Argv0 = cut(p.Argv0, MaxNameBytes)
	if p.Tag != "" && !validContextID(p.Tag) {
		return fmt.Errorf("bad tag")
	}
	if p.PTY != nil {
		return validPTYSize(p.PTY.Cols, p.PTY.Rows)
	}
	return nil
}

// validPID reports whether pid can be a process ID.
func validPID(pid int) bool { return pid > 0 && pid <= math.MaxInt32 }

func validateProcesses(ps []ProcessInfo) error {
	if len(ps) > MaxProcessList {
		return fmt.Errorf("too many processes")
	}
	seen := make(map[int]bool, len(ps))
	for i := range ps {
		if err := validateProcess(&ps[i]); err != nil {
			return err
		}
		if seen[ps[i].PID] {
			return fmt.Errorf("pid %d listed twice", ps[i].PID)
		}
		seen[ps[i].PID] = true
	}
	return nil
}

// Processes lists the agent's retained programs, oldest first: running,
// or ended with their exit not yet delivered. (The agent cuts the list at
// MaxProcessList entries or one frame, and sets Response.More then.)
func (c *Client) Processes(ctx context.Context) ([]ProcessInfo, error) {
	r, err := c.roundTrip(ctx, Request{Op: OpProcesses})
	if err != nil {
		return nil, err
	}
	return r.Processes, nil
}

// Attach reads a retained program again: its output from the beginning
// (as much as was retained) goes to stdout and stderr, then what it
// writes from now on; Wait returns its exit status. The Process has no
// stdin (Write and CloseStdin fail with ErrNoStdin).
func (c *Client) Attach(ctx context.Context, pid int, stdout, stderr io.Writer) (airlock.Process, error) {
	r := Request{Op: OpAttach, PID: pid}
	if err := r.Validate(); err != nil {
		return nil, fmt.Errorf("protocol: %w", err)
	}
	return c.startProcess(ctx, r, stdout, stderr)
}

// AttachTerminal reads a retained program on a terminal again and takes
// its input: what it wrote after the first offset bytes of its stdout
// (as much as the agent kept) goes to stdout, then what it writes from
// now on; the Process takes Write and Resize. from is where in its
// stdout the bytes sent start (past offset when the agent no longer held
// what came between).
func (c *Client) AttachTerminal(ctx context.Context, pid int, offset int64, stdout io.Writer) (p airlock.Process, from int64, err error) {
	r := Request{Op: OpAttach, PID: pid, Offset: offset, Stdin: true}
	if err := r.Validate(); err != nil {
		return nil, 0, fmt.Errorf("protocol: %w", err)
	}
	proc, resp, err := c.startProcessResp(ctx, r, stdout, nil)
	if err != nil {
		return nil, 0, err
	}
	return proc, resp.Offset, nil
}

// Detach stops the agent sending a retained program on the stream of
// this connection that reads it; the program runs on, keeping its
// output, until an attach. The host's Process of that stream gets
// nothing more (it ends with the connection).
func (c *Client) Detach(ctx context.Context, pid int) error {
	r := Request{Op: OpDetach, PID: pid}
	if err := r.Validate(); err != nil {
		return fmt.Errorf("protocol: %w", err)
	}
	_, err := c.roundTrip(ctx, r)
	return err
}
