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
