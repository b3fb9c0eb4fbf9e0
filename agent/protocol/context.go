package protocol

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"syscall"

	"github.com/airlockhq/airlock"
)

// Code contexts: persistent interpreters the agent keeps in a session's
// sandbox. The host names each context; a run streams the cell's stdout
// and stderr as TStdout/TStderr frames, then the CellResult JSON as TData
// frames and a TDataEnd (a result with figures is larger than one frame).
// A TSignal frame on a run's stream interrupts the cell.
const (
	OpContextCreate  Op = "context_create"
	OpContextRun     Op = "context_run"
	OpContextRestart Op = "context_restart"
	OpContextClose   Op = "context_close"
	OpContextList    Op = "context_list" // Response.Contexts
)

// Context languages.
const (
	ContextPython = "python"
	ContextNode   = "node"
)

// Context states in a ContextInfo.
const (
	ContextIdle = "idle" // ready for a cell
	ContextBusy = "busy" // starting, restarting or running a cell
	ContextDead = "dead" // its interpreter ended; restart it
)

// ContextInfo, ContextRequest and CellResult are the domain's; see
// messages.go.
type (
	ContextInfo    = airlock.ContextInfo
	ContextRequest = airlock.ContextRequest
	CellError      = airlock.CellError
	CellOutput     = airlock.CellOutput
	CellResult     = airlock.AgentCellResult
)

// validateContextInfo checks a context entry from the agent.
func validateContextInfo(c *ContextInfo) error {
	if !validContextID(c.ID) {
		return fmt.Errorf("bad context id")
	}
	if c.Language != ContextPython && c.Language != ContextNode {
		return fmt.Errorf("unknown context language %q", c.Language)
	}
	if c.State != ContextIdle && c.State != ContextBusy && c.State != ContextDead {
		return fmt.Errorf("unknown context state %q", c.State)
	}
	if c.CreatedAtMS < 0 || c.Runs < 0 {
		return fmt.Errorf("negative value")
	}
	return nil
}

func validateContexts(cs []ContextInfo) error {
	if len(cs) > MaxContexts {
		return fmt.Errorf("too many contexts")
	}
	seen := make(map[string]bool, len(cs))
	for i := range cs {
		if err := validateContextInfo(&cs[i]); err != nil {
			return err
		}
		if seen[cs[i].ID] {
			return fmt.Errorf("context %s listed twice", cs[i].ID)
		}
		seen[cs[i].ID] = true
	}
	return nil
}

// Bounds of context messages.
const (
	MaxContexts        = 16       // per agent
	MaxCellResultBytes = 32 << 20 // one encoded CellResult
	MaxCellValueBytes  = 1 << 20
	MaxCellErrorBytes  = 64 << 10 // each of name, value and traceback
	MaxCellOutputs     = 64
	MaxCellOutputBytes = 16 << 20 // one output's data
)

// validContextID reports whether id is 1-64 of [a-zA-Z0-9_-]. (Not a
// regexp: compiling one at package init costs every agent start half a
// millisecond.)
func validContextID(id string) bool {
	if id == "" || len(id) > 64 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

func (r *Request) validateContext() error {
	c := r.Context
	if c == nil {
		return fmt.Errorf("%s request without context", r.Op)
	}
	if !validContextID(c.ID) {
		return fmt.Errorf("bad context id")
	}
	if c.MemoryLimitBytes < 0 || c.TimeoutMS < 0 {
		return fmt.Errorf("negative limit")
	}
	if len(c.Code) > 4<<20 {
		return fmt.Errorf("code too large")
	}
	if r.Op == OpContextCreate && c.Language != ContextPython && c.Language != ContextNode {
		return fmt.Errorf("unknown context language %q", c.Language)
	}
	if len(c.Env) > MaxArgs {
		return fmt.Errorf("too many environment entries")
	}
	for _, kv := range c.Env {
		if !bytes.ContainsRune([]byte(kv), '=') || kv[0] == '=' {
			return fmt.Errorf("bad environment entry")
		}
	}
	return nil
}

// validateCellResult bounds a cell result from the agent: it cuts
// over-long text, drops outputs of unknown types or bad encoding, and
// refuses only what cannot be repaired.
func validateCellResult(r *CellResult) error {
	if r.DurationMS < 0 || r.Dropped < 0 {
		return fmt.Errorf("negative value")
	}
	r.Value = cut(r.Value, MaxCellValueBytes)
	if r.Error != nil {
		r.Error.Name = cut(r.Error.Name, MaxCellErrorBytes)
		r.Error.Value = cut(r.Error.Value, MaxCellErrorBytes)
		r.Error.Traceback = cut(r.Error.Traceback, MaxCellErrorBytes)
	}
	if len(r.Outputs) > MaxCellOutputs {
		r.Dropped += len(r.Outputs) - MaxCellOutputs
		r.Outputs = r.Outputs[:MaxCellOutputs]
	}
	kept := r.Outputs[:0]
	for _, o := range r.Outputs {
		ok := len(o.Data) <= MaxCellOutputBytes
		switch o.Type {
		case "image/png":
			b, err := base64.StdEncoding.DecodeString(o.Data)
			ok = ok && err == nil && bytes.HasPrefix(b, []byte("\x89PNG\r\n\x1a\n"))
		case "text/html", "text/plain":
		default:
			ok = false
		}
		if ok {
			kept = append(kept, o)
		} else {
			r.Dropped++
		}
	}
	r.Outputs = kept
	return nil
}

// DecodeCellResult decodes and validates an encoded CellResult from the
// agent: strictly (unknown fields and trailing data are errors), bounded
// by MaxCellResultBytes.
func DecodeCellResult(b []byte) (*CellResult, error) {
	if len(b) > MaxCellResultBytes {
		return nil, fmt.Errorf("protocol: cell result larger than %d bytes", MaxCellResultBytes)
	}
	var r CellResult
	if err := Decode(b, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// EncodeCellResult encodes r for the wire (the agent's side).
func EncodeCellResult(r *CellResult) ([]byte, error) {
	b, err := json.Marshal(r)
	if err != nil {
		return nil, err
	}
	if len(b) > MaxCellResultBytes {
		return nil, fmt.Errorf("cell result larger than %d bytes", MaxCellResultBytes)
	}
	return b, nil
}

// CreateContext starts a persistent interpreter named req.ID and returns
// its PID once it is ready for cells.
func (c *Client) CreateContext(ctx context.Context, req ContextRequest) (int, error) {
	r := Request{Op: OpContextCreate, Context: &req}
	if err := r.Validate(); err != nil {
		return 0, fmt.Errorf("protocol: %w", err)
	}
	resp, err := c.roundTrip(ctx, r)
	if err != nil {
		return 0, err
	}
	return resp.PID, nil
}

// RestartContext replaces a context's interpreter with a fresh one (a
// cell running in it ends) and returns the new PID.
func (c *Client) RestartContext(ctx context.Context, id string) (int, error) {
	r := Request{Op: OpContextRestart, Context: &ContextRequest{ID: id}}
	if err := r.Validate(); err != nil {
		return 0, fmt.Errorf("protocol: %w", err)
	}
	resp, err := c.roundTrip(ctx, r)
	if err != nil {
		return 0, err
	}
	return resp.PID, nil
}

// CloseContext ends a context and its interpreter.
func (c *Client) CloseContext(ctx context.Context, id string) error {
	r := Request{Op: OpContextClose, Context: &ContextRequest{ID: id}}
	if err := r.Validate(); err != nil {
		return fmt.Errorf("protocol: %w", err)
	}
	_, err := c.roundTrip(ctx, r)
	return err
}

// ListContexts lists the agent's code contexts.
func (c *Client) ListContexts(ctx context.Context) ([]ContextInfo, error) {
	r, err := c.roundTrip(ctx, Request{Op: OpContextList})
	if err != nil {
		return nil, err
	}
	return r.Contexts, nil
}

// RunCell runs code in a context. The cell's output goes to stdout and
// stderr as it arrives (from one goroutine; nil discards). If ctx ends
// first, the cell is interrupted (SIGINT) and ctx's error returned.
func (c *Client) RunCell(ctx context.Context, id, code string, timeoutMS int64, stdout, stderr io.Writer) (*CellResult, error) {
	r := Request{Op: OpContextRun, Context: &ContextRequest{ID: id, Code: code, TimeoutMS: timeoutMS}}
	if err := r.Validate(); err != nil {
		return nil, fmt.Errorf("protocol: %w", err)
	}
	if stdout == nil {
		stdout = io.Discard
	}
	if stderr == nil {
		stderr = io.Discard
	}
	sid, s, err := c.open(r)
	if err != nil {
		return nil, err
	}
	defer c.forget(sid)
	var result []byte
	for {
		f, err := c.recv(ctx, s)
		if err != nil {
			if ctx.Err() != nil {
				c.write(Frame{Type: TSignal, Stream: sid, Payload: Encode(SignalRequest{Signal: int(syscall.SIGINT)})})
			}
			return nil, err
		}
		switch f.Type {
		case TStdout:
			stdout.Write(f.Payload)
		case TStderr:
			stderr.Write(f.Payload)
		case TData:
			if len(result)+len(f.Payload) > MaxCellResultBytes {
				return nil, fmt.Errorf("%w: cell result larger than %d bytes", errViolation, MaxCellResultBytes)
			}
			result = append(result, f.Payload...)
		case TDataEnd:
			return DecodeCellResult(result)
		case TError:
			return nil, remoteError(f)
		default:
			return nil, fmt.Errorf("%w: unexpected %s frame during a cell", errViolation, f.Type)
		}
	}
}
