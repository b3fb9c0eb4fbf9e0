package airlock

import (
	"context"
	"io"
)

// Agent is the host's connection to the agent inside a sandbox
// (Sandbox.Agent). Everything it returns comes from inside the sandbox
// and is untrusted; the implementation (agent/protocol's Client) bounds
// and validates it before it is returned. It is the sum of the small
// interfaces below, so a caller that needs only files can take an
// AgentFiles.
type Agent interface {
	AgentRunner
	AgentFiles
	AgentContexts
	// Health asks the agent how it is.
	Health(ctx context.Context) (*AgentHealth, error)
	// Prepare starts a warm runtime (see PrepareRequest).
	Prepare(ctx context.Context, req PrepareRequest) error
}

// AgentRunner runs programs in the sandbox.
type AgentRunner interface {
	// Exec starts a program. Its stdout and stderr are written to the
	// given writers as they arrive (nil discards), from one goroutine.
	// Exec returns once the program has started.
	Exec(ctx context.Context, req ExecRequest, stdout, stderr io.Writer) (Process, error)
	// Processes lists the retained programs (ExecRequest.RetainBytes)
	// that are running or whose exit no host has received yet.
	Processes(ctx context.Context) ([]ProcessInfo, error)
	// Attach reads a retained program again: its retained output, then
	// what it writes from now on. The Process has no stdin.
	Attach(ctx context.Context, pid int, stdout, stderr io.Writer) (Process, error)
	// AttachTerminal reads a retained program on a terminal again and
	// takes its input and size (the Process is a Resizer): what it wrote
	// after the first offset bytes (the host holds those), as much as
	// the agent kept, then what it writes from now on. from is where in
	// its output the bytes sent start.
	AttachTerminal(ctx context.Context, pid int, offset int64, stdout io.Writer) (p Process, from int64, err error)
	// Detach stops the agent sending a retained program to this host's
	// stream of it; the program runs on, keeping its output, for an
	// attach (a terminal's before its sandbox is checkpointed).
	Detach(ctx context.Context, pid int) error
}

// AgentFiles reads and writes files under the sandbox's roots. Paths are
// checked by the agent, which never follows a symlink.
type AgentFiles interface {
	// Put writes r to path, creating or replacing it atomically.
	Put(ctx context.Context, path string, mode uint32, r io.Reader) (int64, error)
	// Get copies path to w, at most max bytes.
	Get(ctx context.Context, path string, w io.Writer, max int64) (int64, error)
	Stat(ctx context.Context, path string) (*FileInfo, error)
	// List lists a directory; more reports a list cut by the agent.
	List(ctx context.Context, path string) (entries []FileInfo, more bool, err error)
	Mkdir(ctx context.Context, path string) (*FileInfo, error)
	Move(ctx context.Context, src, dst string) (*FileInfo, error)
	// Remove removes a file or an empty directory; RemoveAll a tree.
	Remove(ctx context.Context, path string) error
	RemoveAll(ctx context.Context, path string) error
}

// AgentContexts drives the agent's persistent interpreters (code
// contexts).
type AgentContexts interface {
	// CreateContext starts an interpreter named req.ID and returns its
	// PID once it is ready for cells.
	CreateContext(ctx context.Context, req ContextRequest) (int, error)
	RestartContext(ctx context.Context, id string) (int, error)
	CloseContext(ctx context.Context, id string) error
	ListContexts(ctx context.Context) ([]ContextInfo, error)
	// RunCell runs code in a context, streaming its output; if ctx ends
	// first the cell is interrupted.
	RunCell(ctx context.Context, id, code string, timeoutMS int64, stdout, stderr io.Writer) (*AgentCellResult, error)
}

// Process is a program running in a sandbox, started by Exec or read
// again by Attach.
type Process interface {
	// PID is the program's process ID inside the sandbox.
	PID() int
	// Done is closed when the program has ended or the agent is gone.
	Done() <-chan struct{}
	// Wait returns the program's exit status; an error means it is
	// unknown (the agent or the sandbox went away).
	Wait(ctx context.Context) (ExitStatus, error)
	// Write sends bytes to the program's stdin (the exec asked for it).
	Write(b []byte) (int, error)
	CloseStdin() error
	// Signal delivers a signal to the program's process group.
	Signal(sig int) error
}

// The types below are what the Agent takes and returns. Their JSON names
// are the agent protocol's wire names (agent/protocol aliases them and
// validates them on decode): renaming a field changes the wire.

// ExecRequest is a program for the agent to run.
type ExecRequest struct {
	Argv      []string `json:"argv"`
	Env       []string `json:"env,omitempty"` // KEY=VALUE, added to the agent's base environment
	Cwd       string   `json:"cwd,omitempty"` // default /workspace
	Stdin     bool     `json:"stdin,omitempty"`
	TimeoutMS int64    `json:"timeout_ms,omitempty"` // agent kills the process group at the deadline
	// Warm asks the agent to run the program in its prepared runtime when
	// one matches Argv ([interpreter, file]); else it starts it afresh.
	Warm bool `json:"warm,omitempty"`
	// MemoryLimitBytes, if set, is the program's address-space limit
	// (RLIMIT_AS), set before it runs: in a session one command that
	// allocates too much fails alone instead of taking the sandbox down.
	MemoryLimitBytes int64 `json:"memory_limit_bytes,omitempty"`
	// RetainBytes, if set, makes the program outlive its host connection:
	// the agent keeps the first RetainBytes of its stdout and of its
	// stderr and, once it ends, its exit status, until a host collects
	// them (Attach). A program on a terminal (PTY) keeps the last
	// RetainBytes of its output instead, as its scrollback, and its
	// terminal stays open while no host reads it (AttachTerminal).
	// Bounded by the protocol (MaxRetainBytes).
	RetainBytes int64 `json:"retain_bytes,omitempty"`
	// Tag is the host's name for a retained program (its execution's
	// ID), reported back by Processes so that a host that reconnects
	// knows which program is which: 0 to 64 of [A-Za-z0-9_-].
	Tag string `json:"tag,omitempty"`
	// Files are written (as by a put: a new file renamed into place,
	// never through a link) before the program starts: the code of a
	// one-shot run, handed in with the exec in one round trip. Bounded
	// by the protocol (MaxInlineFiles, MaxInlineBytes).
	Files []InlineFile `json:"files,omitempty"`
	// PTY, if set, runs the program on a pseudo-terminal of that size:
	// its stdin, stdout and stderr are the terminal, its output comes as
	// stdout, and the host may resize it (Resizer).
	PTY *PTYSize `json:"pty,omitempty"`
}

// PTYSize is the size of a terminal in character cells.
type PTYSize struct {
	Cols int `json:"cols"`
	Rows int `json:"rows"`
}

// Resizer is implemented by a Process started with a PTY: Resize changes
// the size of its terminal (the program gets SIGWINCH).
type Resizer interface {
	Resize(cols, rows int) error
}

// InlineFile is a small file handed in with an exec.
type InlineFile struct {
	Path string `json:"path"`
	Mode uint32 `json:"mode,omitempty"` // permission bits; 0644 if 0
	Data []byte `json:"data"`
}

// ExitStatus is how a program ended.
type ExitStatus struct {
	Code     int    `json:"code"`             // 0-255, or 128+signal when killed
	Signal   int    `json:"signal,omitempty"` // the signal that ended it, if any
	TimedOut bool   `json:"timed_out,omitempty"`
	Error    string `json:"error,omitempty"` // the program could not start
	// Bytes of a retained program's output beyond its RetainBytes: a host
	// that collected the result by Attach got it cut when these are set.
	StdoutDropped int64 `json:"stdout_dropped,omitempty"`
	StderrDropped int64 `json:"stderr_dropped,omitempty"`
}

// AgentHealth is the agent's view of itself.
type AgentHealth struct {
	UptimeMS  int64 `json:"uptime_ms"`
	Processes int   `json:"processes"`
}

// FileInfo describes one file in a sandbox, as the agent reports it.
type FileInfo struct {
	Name    string `json:"name"`
	Size    int64  `json:"size"`
	Mode    uint32 `json:"mode"` // Go fs.FileMode bits
	MtimeNS int64  `json:"mtime_ns"`
	IsDir   bool   `json:"is_dir"`
}

// ProcessInfo describes one retained program.
type ProcessInfo struct {
	PID         int    `json:"pid"`
	Argv0       string `json:"argv0"`
	StartedAtMS int64  `json:"started_at_ms"` // unix milliseconds
	TimeoutMS   int64  `json:"timeout_ms"`    // as asked in its exec; 0 for none
	Running     bool   `json:"running"`       // false: ended, exit not yet delivered
	Attached    bool   `json:"attached"`      // a live host stream reads it now
	Tag         string `json:"tag,omitempty"` // the exec's Tag
	// PTY is the size of the program's terminal; nil without one.
	PTY *PTYSize `json:"pty,omitempty"`
}

// PrepareRequest starts a warm runtime: an interpreter started, the
// image's common modules imported, waiting for the path of the code to
// run.
type PrepareRequest struct {
	Runtime string   `json:"runtime"`
	Env     []string `json:"env,omitempty"`     // added to the agent's environment
	Preload []string `json:"preload,omitempty"` // modules to import up front
	// Checkpoint says the sandbox is checkpointed in this state: the
	// runtime collects and trims its heap first, so the snapshot saves
	// (and every restore loads) fewer pages. A runtime that serves a
	// booted sandbox skips that work, which would cost every start CPU
	// and save nothing.
	Checkpoint bool `json:"checkpoint,omitempty"`
}

// ContextInfo describes one code context in the agent.
type ContextInfo struct {
	ID          string `json:"id"`
	Language    string `json:"language"`
	State       string `json:"state"`
	CreatedAtMS int64  `json:"created_at_ms"` // unix milliseconds
	Runs        int64  `json:"runs"`          // cells run (or started) in it
}

// ContextRequest names a code context and says what to do with it.
type ContextRequest struct {
	ID       string   `json:"id"`                 // chosen by the host
	Language string   `json:"language,omitempty"` // create
	Env      []string `json:"env,omitempty"`      // create: added to the agent's environment
	// MemoryLimitBytes is the interpreter's RLIMIT_AS (create).
	MemoryLimitBytes int64  `json:"memory_limit_bytes,omitempty"`
	Code             string `json:"code,omitempty"`       // run
	TimeoutMS        int64  `json:"timeout_ms,omitempty"` // run: interrupt the cell at the deadline
}

// AgentCellResult is what the agent reports at the end of a cell (the
// session service makes a CellResult of it).
type AgentCellResult struct {
	Value      string       `json:"value,omitempty"` // text of the final expression's value
	Error      *CellError   `json:"error,omitempty"`
	Outputs    []CellOutput `json:"outputs,omitempty"`
	Dropped    int          `json:"dropped,omitempty"` // outputs left out by the caps
	TimedOut   bool         `json:"timed_out,omitempty"`
	Died       bool         `json:"died,omitempty"` // the interpreter ended: the context is dead
	DurationMS int64        `json:"duration_ms,omitempty"`
}
