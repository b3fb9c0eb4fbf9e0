package airlock

import (
	"context"
	"strings"
)

// Terminals (PTYs) of a session. A PTY is a program (by default the
// sandbox user's login shell) running on a pseudo-terminal in the
// session's sandbox; clients attach to it, type into it, resize it and
// detach, and it ends when its program exits or it is deleted.
const (
	// MaxPTYsPerSession bounds the terminals one session holds at once.
	MaxPTYsPerSession = 8
	// PTYScrollbackBytes is how much of a terminal's latest output is
	// kept and replayed to a client that attaches.
	PTYScrollbackBytes = 64 << 10
	// MaxPTYCells bounds either side of a terminal's size.
	MaxPTYCells = 1000
)

// DefaultPTYCmd is the program of a PTY created without one: the login
// shell bash, or sh where the image has no bash.
var DefaultPTYCmd = []string{"/bin/sh", "-c", "if command -v bash >/dev/null 2>&1; then exec bash -l; fi; exec sh -l"}

// CreatePTYRequest is the body of POST /v1/sessions/{id}/pty.
type CreatePTYRequest struct {
	Cols int               `json:"cols"`
	Rows int               `json:"rows"`
	Cmd  []string          `json:"cmd,omitempty"` // default DefaultPTYCmd
	Env  map[string]string `json:"env,omitempty"`
	Cwd  string            `json:"cwd,omitempty"` // default /workspace
}

// Validate checks a PTY request.
func (r *CreatePTYRequest) Validate() error {
	if err := ValidatePTYSize(r.Cols, r.Rows); err != nil {
		return err
	}
	if len(r.Cmd) > 0 && r.Cmd[0] == "" {
		return Problem(EINVALID, "invalid-pty", "cmd[0] is empty")
	}
	if len(r.Cwd) > 4096 || strings.ContainsRune(r.Cwd, 0) {
		return Problem(EINVALID, "invalid-pty", "bad cwd")
	}
	n := 0
	for _, a := range r.Cmd {
		n += len(a)
		if strings.ContainsRune(a, 0) {
			return Problem(EINVALID, "invalid-pty", "cmd holds a NUL byte")
		}
	}
	for k, v := range r.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") || strings.ContainsRune(v, 0) {
			return Problem(EINVALID, "invalid-pty", "bad environment variable %q", k)
		}
		n += len(k) + len(v) + 1
	}
	if len(r.Cmd)+len(r.Env) > 4096 || n > 256<<10 {
		return Problem(EINVALID, "invalid-pty", "cmd and env are too large")
	}
	return nil
}

// ValidatePTYSize checks a terminal size in character cells.
func ValidatePTYSize(cols, rows int) error {
	if cols < 1 || rows < 1 || cols > MaxPTYCells || rows > MaxPTYCells {
		return Problem(EINVALID, "invalid-pty-size", "terminal size %dx%d: cols and rows must be between 1 and %d", cols, rows, MaxPTYCells)
	}
	return nil
}

// PTYInfo describes a terminal of a session.
type PTYInfo struct {
	PTYID     string `json:"pty_id"`
	SessionID string `json:"session_id"`
	PID       int    `json:"pid"` // inside the sandbox
	Cols      int    `json:"cols"`
	Rows      int    `json:"rows"`
}

// PTYService serves the terminals of sessions (the session manager).
type PTYService interface {
	// CreatePTY starts a program on a new terminal in the tenant's
	// session.
	CreatePTY(ctx context.Context, tenant *Tenant, sessionID string, req CreatePTYRequest) (*PTYInfo, error)
	// AttachPTY attaches a client to a terminal; its Output starts with
	// the terminal's scrollback.
	AttachPTY(ctx context.Context, tenant *Tenant, sessionID, ptyID string) (PTYAttachment, error)
	// DeletePTY ends a terminal (its program's process group is killed).
	DeletePTY(ctx context.Context, tenant *Tenant, sessionID, ptyID string) error
}

// PTYAttachment is one client attached to a terminal.
type PTYAttachment interface {
	Info() PTYInfo
	// Output delivers the scrollback, then the live output; it is closed
	// when the client is detached (Detach, or too slow to keep up) or
	// the terminal has ended.
	Output() <-chan []byte
	// Done is closed when the terminal has ended; Exit then says how its
	// program ended (an error: unknown, the session or server ended).
	Done() <-chan struct{}
	Exit() (ExitStatus, error)
	// Input types into the terminal; Resize changes its size.
	Input(b []byte) error
	Resize(cols, rows int) error
	// Detach lets go of the terminal; it runs on.
	Detach()
}
