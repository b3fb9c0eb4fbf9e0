package protocol

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/airlockhq/airlock"
)

// Process is a program running in the sandbox, started by Client.Exec or
// read again by Client.Attach.
type Process struct {
	c        *Client
	id       uint32
	pid      int
	attached bool // by Attach without Stdin: no stdin
	done     chan struct{}

	status ExitStatus
	err    error
}

// ErrNoStdin is returned for input to an attached process: its stdin was
// closed when the host that started it went away.
var ErrNoStdin = errors.New("protocol: an attached process has no stdin")

// Exec starts a program. Its stdout and stderr are written to the given
// writers as they arrive (nil discards); the writers are called from one
// goroutine, never concurrently. Exec returns once the agent has started
// the program; Wait returns its exit status.
func (c *Client) Exec(ctx context.Context, req ExecRequest, stdout, stderr io.Writer) (airlock.Process, error) {
	if err := validateExec(&req); err != nil {
		return nil, fmt.Errorf("protocol: %w", err)
	}
	return c.startProcess(ctx, Request{Op: OpExec, Exec: &req}, stdout, stderr)
}

// startProcess sends an exec or attach request, waits for the agent's
// acknowledgment and starts reading the program's frames.
func (c *Client) startProcess(ctx context.Context, req Request, stdout, stderr io.Writer) (*Process, error) {
	p, _, err := c.startProcessResp(ctx, req, stdout, stderr)
	return p, err
}

// startProcessResp is startProcess that also returns the agent's
// acknowledgment.
func (c *Client) startProcessResp(ctx context.Context, req Request, stdout, stderr io.Writer) (*Process, Response, error) {
	var r Response
	id, s, err := c.open(req)
	if err != nil {
		return nil, r, err
	}
	f, err := c.recv(ctx, s)
	if err != nil {
		c.forget(id)
		return nil, r, err
	}
	p := &Process{c: c, id: id, attached: req.Op == OpAttach && !req.Stdin, done: make(chan struct{})}
	switch f.Type {
	case TResponse:
		if err := Decode(f.Payload, &r); err != nil {
			c.forget(id)
			return nil, r, err
		}
		p.pid = r.PID
	case TError:
		c.forget(id)
		return nil, r, remoteError(f)
	default:
		c.forget(id)
		return nil, r, fmt.Errorf("%w: unexpected %s frame starting %s", errViolation, f.Type, req.Op)
	}
	if req.Op == OpAttach && p.pid != req.PID {
		c.forget(id)
		return nil, r, fmt.Errorf("%w: attached pid %d, asked for %d", errViolation, p.pid, req.PID)
	}
	if req.Op == OpAttach && r.Offset < req.Offset {
		c.forget(id)
		return nil, r, fmt.Errorf("%w: attach resent output from %d, asked from %d", errViolation, r.Offset, req.Offset)
	}
	if stdout == nil {
		stdout = io.Discard
	}
	if stderr == nil {
		stderr = io.Discard
	}
	go p.pump(s, stdout, stderr)
	return p, r, nil
}

func (p *Process) pump(s *stream, stdout, stderr io.Writer) {
	defer close(p.done)
	defer p.c.forget(p.id)
	for f := range s.frames {
		switch f.Type {
		case TStdout:
			stdout.Write(f.Payload) // a failing writer only loses its own copy
		case TStderr:
			stderr.Write(f.Payload)
		case TExit:
			var st ExitStatus
			if err := Decode(f.Payload, &st); err != nil {
				p.err = err
				return
			}
			p.status = st
			return
		case TError:
			p.err = remoteError(f)
			return
		default:
			p.err = fmt.Errorf("%w: unexpected %s frame from a process", errViolation, f.Type)
			return
		}
	}
	p.err = p.c.Err()
	if p.err == nil {
		p.err = ErrClosed
	}
}

// PID is the program's process ID inside the sandbox.
func (p *Process) PID() int { return p.pid }

// Done is closed when the process has ended or the connection is gone.
func (p *Process) Done() <-chan struct{} { return p.done }

// Wait waits for the program to end and returns its exit status. An error
// means the status is unknown (the agent or the sandbox went away).
func (p *Process) Wait(ctx context.Context) (ExitStatus, error) {
	select {
	case <-p.done:
		return p.status, p.err
	case <-ctx.Done():
		return ExitStatus{}, ctx.Err()
	}
}

// Write sends bytes to the program's stdin (the exec must have asked for
// stdin). Large writes are split into frames.
func (p *Process) Write(b []byte) (int, error) {
	if p.attached {
		return 0, ErrNoStdin
	}
	n := 0
	for len(b) > 0 {
		chunk := b
		if len(chunk) > MaxPayload {
			chunk = chunk[:MaxPayload]
		}
		if err := p.c.write(Frame{Type: TStdin, Stream: p.id, Payload: chunk}); err != nil {
			return n, err
		}
		n += len(chunk)
		b = b[len(chunk):]
	}
	return n, nil
}

// CloseStdin closes the program's stdin.
func (p *Process) CloseStdin() error {
	if p.attached {
		return ErrNoStdin
	}
	return p.c.write(Frame{Type: TStdinClose, Stream: p.id})
}

// Signal delivers a signal to the program's process group.
func (p *Process) Signal(sig int) error {
	m := SignalRequest{Signal: sig}
	if err := m.Validate(); err != nil {
		return err
	}
	return p.c.write(Frame{Type: TSignal, Stream: p.id, Payload: Encode(m)})
}
