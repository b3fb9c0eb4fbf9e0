package protocol

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path"
	"strings"
	"unicode/utf8"
)

// Limits on what either side may send, checked on decode.
const (
	MaxArgs        = 4096
	MaxArgBytes    = 256 << 10 // all of argv plus env
	MaxPathBytes   = 4096
	MaxNameBytes   = 255
	MaxListEntries = 1000 // one list response; more are reported as truncated
)

// Op names a request.
type Op string

const (
	OpHealth   Op = "health"
	OpExec     Op = "exec"
	OpPut      Op = "put"
	OpGet      Op = "get"
	OpList     Op = "list"
	OpStat     Op = "stat"
	OpRemove   Op = "remove"
	OpShutdown Op = "shutdown"
	OpPrepare  Op = "prepare" // start a warm runtime; see warm.go

	OpChannel   Op = "channel"   // where to dial when the host goes away; see channel.go
	OpProcesses Op = "processes" // list retained programs; see processes.go
	OpAttach    Op = "attach"    // read a retained program again; see processes.go
)

// Hello is the first frame the agent sends on every connection.
type Hello struct {
	Version int    `json:"version"`
	Agent   string `json:"agent"` // build identifier of the agent
	PID     int    `json:"pid"`
	// Token is the channel token (see ChannelRequest) on a connection the
	// agent dialed; empty on its first stream.
	Token string `json:"token,omitempty"`
}

// Validate checks a Hello from the agent.
func (h *Hello) Validate() error {
	if h.Version != Version {
		return fmt.Errorf("protocol: agent speaks version %d, want %d", h.Version, Version)
	}
	if len(h.Agent) > MaxNameBytes {
		return fmt.Errorf("protocol: agent name too long")
	}
	if h.Token != "" && !validToken(h.Token) {
		return fmt.Errorf("protocol: bad token in hello")
	}
	return nil
}

// Request opens a stream. Exactly the fields of its Op are set.
type Request struct {
	Op   Op           `json:"op"`
	Exec *ExecRequest `json:"exec,omitempty"`
	Path string       `json:"path,omitempty"` // put, get, list, stat, remove
	Mode uint32       `json:"mode,omitempty"` // put
	Max  int64        `json:"max,omitempty"`  // get: most bytes to send

	Prepare *PrepareRequest `json:"prepare,omitempty"`
	Context *ContextRequest `json:"context,omitempty"` // context ops; see context.go
	Channel *ChannelRequest `json:"channel,omitempty"` // channel
	PID     int             `json:"pid,omitempty"`     // attach

	Dest      string `json:"dest,omitempty"`      // move: the new path; see fsops.go
	Recursive bool   `json:"recursive,omitempty"` // remove: a whole directory tree
}

// Validate checks a request (the agent calls it on what the host sends).
func (r *Request) Validate() error {
	switch r.Op {
	case OpHealth, OpShutdown, OpProcesses, OpContextList:
		return nil
	case OpChannel:
		if r.Channel == nil {
			return fmt.Errorf("channel request without channel")
		}
		return r.Channel.Validate()
	case OpAttach:
		if !validPID(r.PID) {
			return fmt.Errorf("bad pid %d", r.PID)
		}
		return nil
	case OpPrepare:
		if r.Prepare == nil {
			return fmt.Errorf("prepare request without prepare")
		}
		return r.Prepare.Validate()
	case OpContextCreate, OpContextRun, OpContextRestart, OpContextClose:
		return r.validateContext()
	case OpExec:
		if r.Exec == nil {
			return fmt.Errorf("exec request without exec")
		}
		return r.Exec.Validate()
	case OpPut, OpGet, OpList, OpStat, OpRemove, OpMkdir:
		_, _, err := CleanPath(r.Path)
		return err
	case OpMove:
		return r.validateMove()
	}
	return fmt.Errorf("unknown op %q", r.Op)
}

// ExecRequest runs a program.
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
	// them (see OpAttach). At most MaxRetainBytes.
	RetainBytes int64 `json:"retain_bytes,omitempty"`
	// Tag is the host's name for a retained program (its execution's
	// ID), reported back by OpProcesses so that a host that reconnects
	// knows which program is which: 0 to 64 of [A-Za-z0-9_-].
	Tag string `json:"tag,omitempty"`
	// Files are written (as by a put: a new file renamed into place,
	// never through a link) before the program starts: the code of a
	// one-shot run, handed in with the exec in one round trip. At most
	// MaxInlineFiles files and MaxInlineBytes in all.
	Files []InlineFile `json:"files,omitempty"`
}

// InlineFile is a small file handed in with an exec.
type InlineFile struct {
	Path string `json:"path"`
	Mode uint32 `json:"mode,omitempty"` // permission bits; 0644 if 0
	Data []byte `json:"data"`
}

// Bounds of the files handed in with an exec: the request, base64 and
// all, stays well inside one frame.
const (
	MaxInlineFiles = 8
	MaxInlineBytes = 96 << 10
)

// Validate bounds an exec request.
func (e *ExecRequest) Validate() error {
	if len(e.Argv) == 0 || e.Argv[0] == "" {
		return fmt.Errorf("empty argv")
	}
	if len(e.Argv)+len(e.Env) > MaxArgs {
		return fmt.Errorf("too many arguments")
	}
	n := 0
	for _, a := range e.Argv {
		n += len(a)
	}
	for _, kv := range e.Env {
		if !strings.Contains(kv, "=") || strings.HasPrefix(kv, "=") {
			return fmt.Errorf("bad environment entry")
		}
		n += len(kv)
	}
	if n > MaxArgBytes {
		return fmt.Errorf("arguments too large")
	}
	if e.TimeoutMS < 0 {
		return fmt.Errorf("negative timeout")
	}
	if e.MemoryLimitBytes < 0 {
		return fmt.Errorf("negative memory limit")
	}
	if e.Tag != "" && !validContextID(e.Tag) {
		return fmt.Errorf("bad tag")
	}
	if len(e.Files) > MaxInlineFiles {
		return fmt.Errorf("too many inline files")
	}
	inline := 0
	for _, f := range e.Files {
		if _, _, err := CleanPath(f.Path); err != nil {
			return fmt.Errorf("inline file: %w", err)
		}
		if f.Mode&^0o777 != 0 {
			return fmt.Errorf("inline file mode %o", f.Mode)
		}
		inline += len(f.Data)
	}
	if inline > MaxInlineBytes {
		return fmt.Errorf("inline files too large")
	}
	if e.RetainBytes < 0 || e.RetainBytes > MaxRetainBytes {
		return fmt.Errorf("retain_bytes %d out of range", e.RetainBytes)
	}
	return nil
}

// ExitStatus ends an exec stream.
type ExitStatus struct {
	Code     int    `json:"code"`             // 0-255, or 128+signal when killed
	Signal   int    `json:"signal,omitempty"` // the signal that ended it, if any
	TimedOut bool   `json:"timed_out,omitempty"`
	Error    string `json:"error,omitempty"` // the program could not start
	// Bytes of a retained program's output beyond its RetainBytes: a host
	// that collected the result by OpAttach got it cut when these are set.
	StdoutDropped int64 `json:"stdout_dropped,omitempty"`
	StderrDropped int64 `json:"stderr_dropped,omitempty"`
}

// Validate checks an exit status from the agent.
func (s *ExitStatus) Validate() error {
	if s.Code < 0 || s.Code > 255 {
		return fmt.Errorf("exit code %d out of range", s.Code)
	}
	if s.Signal < 0 || s.Signal > 64 {
		return fmt.Errorf("signal %d out of range", s.Signal)
	}
	if s.StdoutDropped < 0 || s.StderrDropped < 0 {
		return fmt.Errorf("negative dropped count")
	}
	s.Error = cut(s.Error, MaxPathBytes)
	return nil
}

// Response is the answer to a non-exec request, or the acknowledgment that
// an exec started (with its PID inside the sandbox).
type Response struct {
	PID     int        `json:"pid,omitempty"`
	Health  *Health    `json:"health,omitempty"`
	Entries []FileInfo `json:"entries,omitempty"`
	More    bool       `json:"more,omitempty"` // the list was cut (entries at MaxListEntries; processes)
	Info    *FileInfo  `json:"info,omitempty"`
	Written int64      `json:"written,omitempty"`

	Processes []ProcessInfo `json:"processes,omitempty"` // processes; see processes.go
	Contexts  []ContextInfo `json:"contexts,omitempty"`  // context_list; see context.go
}

// Health is the agent's view of itself.
type Health struct {
	UptimeMS  int64 `json:"uptime_ms"`
	Processes int   `json:"processes"`
}

// FileInfo describes one file in the sandbox.
type FileInfo struct {
	Name    string `json:"name"`
	Size    int64  `json:"size"`
	Mode    uint32 `json:"mode"` // Go fs.FileMode bits
	MtimeNS int64  `json:"mtime_ns"`
	IsDir   bool   `json:"is_dir"`
}

// Validate checks a file entry from the agent.
func (f *FileInfo) Validate() error {
	if f.Name == "" || len(f.Name) > MaxNameBytes || strings.ContainsAny(f.Name, "/\x00") || f.Name == "." || f.Name == ".." {
		return fmt.Errorf("bad file name %q", f.Name)
	}
	if f.Size < 0 {
		return fmt.Errorf("negative size")
	}
	return nil
}

// Validate checks a response from the agent.
func (r *Response) Validate() error {
	if len(r.Entries) > MaxListEntries {
		return fmt.Errorf("too many entries")
	}
	for i := range r.Entries {
		if err := r.Entries[i].Validate(); err != nil {
			return err
		}
	}
	if r.Info != nil {
		if err := r.Info.Validate(); err != nil {
			return err
		}
	}
	if r.PID < 0 || r.Written < 0 {
		return fmt.Errorf("negative value")
	}
	if err := validateProcesses(r.Processes); err != nil {
		return err
	}
	return validateContexts(r.Contexts)
}

// ErrorMessage ends a stream that failed.
type ErrorMessage struct {
	Code    string `json:"code"` // not_found, invalid, exists, io, too_large
	Message string `json:"message"`
}

// Validate bounds an error from the agent.
func (e *ErrorMessage) Validate() error {
	if len(e.Code) > 64 {
		return fmt.Errorf("error code too long")
	}
	e.Message = cut(e.Message, 4096)
	return nil
}

// cut shortens s to at most n bytes without splitting a UTF-8 sequence, so
// the result stays valid text (and survives re-encoding unchanged).
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// SignalRequest delivers a signal to a running exec's process group.
type SignalRequest struct {
	Signal int `json:"signal"`
}

// Validate checks the signal number.
func (s *SignalRequest) Validate() error {
	if s.Signal < 1 || s.Signal > 64 {
		return fmt.Errorf("signal %d out of range", s.Signal)
	}
	return nil
}

// validator is implemented by every message type.
type validator interface{ Validate() error }

// Decode decodes a JSON control payload strictly into v and validates it.
func Decode(payload []byte, v validator) error {
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("protocol: decode: %w", err)
	}
	// dec.More is not enough: it reports false for a stray ']' or '}'.
	if rest := payload[dec.InputOffset():]; len(bytes.TrimLeft(rest, " \t\r\n")) != 0 {
		return fmt.Errorf("protocol: trailing data")
	}
	if err := v.Validate(); err != nil {
		return fmt.Errorf("protocol: %w", err)
	}
	return nil
}

// Encode encodes a control message.
func Encode(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // only fixed message types are encoded
	}
	return b
}

// Roots are the directories file requests may reach inside a sandbox.
// Relative paths are relative to the workspace.
var Roots = []string{"/workspace", "/tmp"}

// CleanPath checks a path given relative to the workspace, or absolute
// under one of Roots, and returns the root and the cleaned path relative to
// it ("." for the root itself). It refuses "..", NUL bytes and anything
// outside the roots.
func CleanPath(p string) (root, rel string, err error) {
	if p == "" || len(p) > MaxPathBytes || strings.ContainsRune(p, 0) {
		return "", "", fmt.Errorf("bad path")
	}
	root = "/workspace"
	if strings.HasPrefix(p, "/") {
		root = ""
		for _, r := range Roots {
			if p == r || strings.HasPrefix(p, r+"/") {
				root = r
				break
			}
		}
		if root == "" {
			return "", "", fmt.Errorf("path %q is outside %s", p, strings.Join(Roots, " and "))
		}
		// TrimLeft, not TrimPrefix: "/workspace//x" must not leave "/x".
		p = strings.TrimLeft(strings.TrimPrefix(p, root), "/")
		if p == "" {
			p = "."
		}
	}
	for _, seg := range strings.Split(p, "/") {
		if seg == ".." {
			return "", "", fmt.Errorf("path %q leaves %s", p, root)
		}
	}
	return root, path.Clean(p), nil
}
