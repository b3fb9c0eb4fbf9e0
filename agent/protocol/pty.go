package protocol

import (
	"fmt"

	"github.com/airlockhq/airlock"
)

// Terminals: an exec with PTY set runs its program on a pseudo-terminal.
// The program's output (stdout and stderr, one stream on a terminal)
// comes as TStdout; TStdin frames are typed into the terminal; a TResize
// frame on the exec's stream carries a ResizeRequest and changes the
// terminal's size. The agent ignores TResize for an exec without a PTY.

// MaxPTYCells bounds either side of a terminal.
const MaxPTYCells = airlock.MaxPTYCells

// PTYSize is the domain's: a terminal's size (ExecRequest.PTY,
// ProcessInfo.PTY).
type PTYSize = airlock.PTYSize

// ResizeRequest is a terminal's new size in character cells.
type ResizeRequest struct {
	Cols int `json:"cols"`
	Rows int `json:"rows"`
}

// Validate checks the size.
func (r *ResizeRequest) Validate() error { return validPTYSize(r.Cols, r.Rows) }

func validPTYSize(cols, rows int) error {
	if cols < 1 || rows < 1 || cols > MaxPTYCells || rows > MaxPTYCells {
		return fmt.Errorf("terminal size %dx%d out of range (1 to %d)", cols, rows, MaxPTYCells)
	}
	return nil
}

// Resize changes the size of the terminal of a program started with a
// PTY (for another program the agent ignores it).
func (p *Process) Resize(cols, rows int) error {
	m := ResizeRequest{Cols: cols, Rows: rows}
	if err := m.Validate(); err != nil {
		return fmt.Errorf("protocol: %w", err)
	}
	if p.attached {
		return ErrNoStdin
	}
	return p.c.write(Frame{Type: TResize, Stream: p.id, Payload: Encode(m)})
}
