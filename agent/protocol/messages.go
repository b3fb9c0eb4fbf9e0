package protocol

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path"
	"strings"
	"unicode/utf8"

	"github.com/airlockhq/airlock"
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
	OpDetach    Op = "detach"    // stop reading a retained program on this connection; see processes.go
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
	PID     int             `json:"pid,omitempty"`     // attach, detach
	// Attach: the bytes of the program's stdout the host holds already
	// (the agent sends only what follows), and whether the attach takes
	// the input and the size of the program's terminal (a PTY only).
	Offset int64 `json:"offset,omitempty"`
	Stdin  bool  `json:"stdin,omitempty"`

	Dest      string `json:"dest,omitempty"`      // move: the new path; see fsops.go
	Recursive bool   `json:"recursive,omitempty"` // remove: a whole directory tree

	Port int `json:"port,omitempty"` // port: the TCP port on the sandbox's loopback; see port.go
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
	case OpAttach, OpDetach:
		if !validPID(r.PID) {
			return fmt.Errorf("bad pid %d", r.PID)
		}
		if r.Offset < 0 {
			return fmt.Errorf("negative offset")
		}
		if r.Op == OpDetach && (r.Offset != 0 || r.Stdin) {
			return fmt.Errorf("detach takes only a pid")
		}
		return nil
	case OpPrepare:
		if r.Prepare == nil {
			return fmt.Errorf("prepare request without prepare")
		}
		return validatePrepare(r.Prepare)
	case OpContextCreate, OpContextRun, OpContextRestart, OpContextClose:
		return r.validateContext()
	case OpExec:
		if r.Exec == nil {
			return fmt.Errorf("exec request without exec")
		}
		return validateExec(r.Exec)
	case OpPut, OpGet, OpList, OpStat, OpRemove, OpMkdir:
		_, _, err := CleanPath(r.Path)
		return err
	case OpMove:
		return r.validateMove()
	case OpPort:
		return ValidatePort(r.Port)
	}
	return fmt.Errorf("unknown op %q", r.Op)
}

// The messages the host's Client sends and receives through the
// airlock.Agent interface are the domain's types; they are aliased here
// and validated by the functions below.
type (
	ExecRequest = airlock.ExecRequest
	InlineFile  = airlock.InlineFile
	ExitStatus  = airlock.ExitStatus
	Health      = airlock.AgentHealth
	FileInfo    = airlock.FileInfo
)

// Bounds of the files handed in with an exec: the request, base64 and
// all, stays well inside one frame.
const (
	MaxInlineFiles = 8
	MaxInlineBytes = 96 << 10
)

// validateExec bounds an exec request.
func validateExec(e *ExecRequest) error {
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
	if e.PTY != nil {
		if err := validPTYSize(e.PTY.Cols, e.PTY.Rows); err != nil {
			return err
		}
		if e.Warm {
			return fmt.Errorf("a warm runtime has no terminal")
		}
	}
	if e.RetainBytes < 0 || e.RetainBytes > MaxRetainBytes {
		return fmt.Errorf("retain_bytes %d out of range", e.RetainBytes)
	}
	return nil
}

// validateExit checks an exit status from the agent.
func validateExit(s *ExitStatus) error {
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
	// Offset is, for an attach, where in the program's stdout the bytes
	// sent start: past the Offset asked for when the agent no longer
	// holds what came between.
	Offset int64 `json:"offset,omitempty"`
}

// validateFileInfo checks a file entry from the agent.
func validateFileInfo(f *FileInfo) error {
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
		if err := validateFileInfo(&r.Entries[i]); err != nil {
			return err
		}
	}
	if r.Info != nil {
		if err := validateFileInfo(r.Info); err != nil {
			return err
		}
	}
	if r.PID < 0 || r.Written < 0 || r.Offset < 0 {
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

// validator is implemented by the message types this package defines.
type validator interface{ Validate() error }

// Validate checks a decoded message: a pointer to any message type, the
// domain's included (whose checks live here, with the protocol's
// bounds). A value of another type is an error.
func Validate(v any) error {
	switch m := v.(type) {
	case validator:
		return m.Validate()
	case *ExecRequest:
		return validateExec(m)
	case *ExitStatus:
		return validateExit(m)
	case *FileInfo:
		return validateFileInfo(m)
	case *ProcessInfo:
		return validateProcess(m)
	case *ContextInfo:
		return validateContextInfo(m)
	case *CellResult:
		return validateCellResult(m)
	case *PrepareRequest:
		return validatePrepare(m)
	case *Health:
		return nil
	}
	return fmt.Errorf("no validation for %T", v)
}

// Decode decodes a JSON control payload strictly into v (a pointer to a
// message type) and validates it.
func Decode(payload []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("protocol: decode: %w", err)
	}
	// dec.More is not enough: it reports false for a stray ']' or '}'.
	if rest := payload[dec.InputOffset():]; len(bytes.TrimLeft(rest, " \t\r\n")) != 0 {
		return fmt.Errorf("protocol: trailing data")
	}
	if err := Validate(v); err != nil {
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
