package airlock

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"
)

// A session is one sandbox kept for many calls (exec, files, code
// contexts) until its timeout, its idle timeout or a DELETE; then it is
// destroyed like any other sandbox.

// SessionState is where a session stands in its lifecycle.
type SessionState string

const (
	SessionCreating   SessionState = "creating"   // the sandbox is being made
	SessionReady      SessionState = "ready"      // live, nothing running
	SessionBusy       SessionState = "busy"       // live, at least one call running
	SessionDestroying SessionState = "destroying" // being torn down
	SessionDestroyed  SessionState = "destroyed"  // gone; EndReason says why
	SessionFailed     SessionState = "failed"     // the sandbox failed; gone as well
	// SessionPaused: the sandbox was saved to disk on its node and is
	// gone (no CPU or memory held); resume restores it.
	SessionPaused SessionState = "paused"
	// SessionLost: the node that held it left the fleet (its lease
	// expired); the sandbox is gone with it or destroyed when the node
	// comes back. Final; EndReason is EndNodeLost.
	SessionLost SessionState = "lost"
)

// SessionStates lists every state in lifecycle order.
var SessionStates = []SessionState{SessionCreating, SessionReady, SessionBusy, SessionPaused, SessionDestroying, SessionDestroyed, SessionFailed, SessionLost}

// sessionMoves is the state machine: the states each state may move to.
// destroyed, failed and lost are final. The fleet's reaper records lost
// in the store from any state that is not final; a node destroying a
// session it lost moves destroying to lost.
var sessionMoves = map[SessionState][]SessionState{
	SessionCreating:   {SessionReady, SessionDestroying, SessionFailed},
	SessionReady:      {SessionBusy, SessionPaused, SessionDestroying, SessionFailed},
	SessionPaused:     {SessionReady, SessionDestroying, SessionFailed},
	SessionBusy:       {SessionReady, SessionDestroying, SessionFailed},
	SessionDestroying: {SessionDestroyed, SessionFailed, SessionLost},
}

// ErrIllegalTransition is wrapped by the error of a refused state move.
var ErrIllegalTransition = &Error{Code: ECONFLICT, Type: "illegal-transition", Message: "illegal session state transition"}

// Valid reports whether s is a known state.
func (s SessionState) Valid() bool {
	for _, x := range SessionStates {
		if s == x {
			return true
		}
	}
	return false
}

// Live reports whether a session in state s still has its sandbox and can
// take calls.
func (s SessionState) Live() bool {
	return s == SessionCreating || s == SessionReady || s == SessionBusy
}

// Final reports whether s is an end state.
func (s SessionState) Final() bool {
	return s == SessionDestroyed || s == SessionFailed || s == SessionLost
}

// Transition checks the move from s to next against the state machine. A
// refused move is an error wrapping ErrIllegalTransition.
func (s SessionState) Transition(next SessionState) error {
	for _, x := range sessionMoves[s] {
		if x == next {
			return nil
		}
	}
	return fmt.Errorf("%w: %s to %s", ErrIllegalTransition, s, next)
}

// Why a session ended (Session.EndReason).
const (
	EndDeleted         = "deleted"          // DELETE /v1/sessions/{id}
	EndTimeout         = "timeout"          // its timeout passed
	EndIdle            = "idle"             // nothing ran for its idle timeout
	EndServerRestarted = "server_restarted" // the server restarted and the sandbox could not be reattached
	EndShutdown        = "shutdown"         // the server shut down
	EndSandboxExited   = "sandbox_exited"   // the sandbox died on its own
	EndOutOfMemory     = "out_of_memory"    // the sandbox as a whole ran out of memory
	EndCreateFailed    = "create_failed"    // the sandbox could not be made
	EndPausedTooLong   = "paused_too_long"  // it stayed paused past the node's maximum
	EndResumeFailed    = "resume_failed"    // its saved sandbox could not be restored
	EndNodeLost        = "node_lost"        // its node left the fleet (state lost)
	// An abuse detector killed the sandbox: AbuseReason(detector), e.g.
	// "abuse:mining" (see AbusePrefix).
)

// SessionSize names a preset of limits; the operator maps each to CPU,
// memory and disk.
type SessionSize string

const (
	SizeSmall  SessionSize = "small"
	SizeMedium SessionSize = "medium"
	SizeLarge  SessionSize = "large"
)

// SessionSizes lists the sizes in order.
var SessionSizes = []SessionSize{SizeSmall, SizeMedium, SizeLarge}

// Valid reports whether z is a known size.
func (z SessionSize) Valid() bool {
	for _, x := range SessionSizes {
		if z == x {
			return true
		}
	}
	return false
}

// CreateSessionRequest is the body of POST /v1/sessions (the shape of the
// reference design). The tenant comes from the API key; a tenant named in
// the body must be that one.
type CreateSessionRequest struct {
	Tenant string `json:"tenant,omitempty"`
	Image  string `json:"image,omitempty"`
	// Template names a template (the tenant's, else the operator's) to
	// start from instead of an image.
	Template     string         `json:"template,omitempty"`
	Size         SessionSize    `json:"size,omitempty"`
	TimeoutS     int            `json:"timeout_s,omitempty"`
	IdleTimeoutS int            `json:"idle_timeout_s,omitempty"`
	Network      *NetworkPolicy `json:"network,omitempty"`
	BrokerScopes []string       `json:"broker_scopes,omitempty"`
	// Isolation asks for a level (see ChooseBackend), as on /v1/execute;
	// empty means the node's default backend.
	Isolation Isolation `json:"isolation,omitempty"`
	// FromSnapshot starts the session with the workspace of one of the
	// tenant's snapshots. Everything else (image, size, network, broker
	// scopes, isolation) is what this request asks for, not what the
	// snapshot's session had; an empty image means the snapshot's.
	FromSnapshot string `json:"from_snapshot,omitempty"`
	// Lifecycle says what the timeout and idle timeout do (end, the
	// default, or pause) and whether a request resumes a paused session.
	Lifecycle *SessionLifecycle `json:"lifecycle,omitempty"`
	// Volumes are the tenant's volumes to mount (volume.go).
	Volumes []VolumeMount `json:"volumes,omitempty"`
}

// MaxIdempotencyKeyBytes bounds an Idempotency-Key header.
const MaxIdempotencyKeyBytes = 255

// ValidIdempotencyKey reports whether k may be used as an idempotency key:
// 1 to MaxIdempotencyKeyBytes bytes of printable ASCII.
func ValidIdempotencyKey(k string) bool {
	if k == "" || len(k) > MaxIdempotencyKeyBytes {
		return false
	}
	for i := 0; i < len(k); i++ {
		if k[i] < 0x21 || k[i] > 0x7e {
			return false
		}
	}
	return true
}

// Validate checks the parts of a request that need no operator config:
// the tenant, size, network and broker scopes. Timeouts and images are the
// session service's to check.
func (r *CreateSessionRequest) Validate(tenant *Tenant) error {
	if r.Tenant != "" && tenant != nil && r.Tenant != tenant.Name && r.Tenant != tenant.ID {
		return Problem(EFORBIDDEN, "tenant-mismatch", "the request names tenant %q but the API key belongs to another tenant", r.Tenant)
	}
	if r.Size != "" && !r.Size.Valid() {
		return Problem(EINVALID, "unknown-size", "unknown size %q (one of small, medium, large)", r.Size)
	}
	if r.TimeoutS < 0 {
		return Problem(EINVALID, "timeout-out-of-range", "timeout_s must not be negative")
	}
	if r.IdleTimeoutS < 0 {
		return Problem(EINVALID, "timeout-out-of-range", "idle_timeout_s must not be negative")
	}
	if err := r.Lifecycle.Validate(); err != nil {
		return err
	}
	if r.Isolation != "" && !r.Isolation.Valid() {
		return Problem(EINVALID, ProblemUnknownIsolation, "unknown isolation %q (one of %s)", r.Isolation, isolationNames())
	}
	if r.Network != nil {
		if err := r.Network.Validate(); err != nil {
			return err
		}
	}
	if len(r.BrokerScopes) > 64 {
		return Problem(EINVALID, "invalid-broker-scope", "at most 64 broker scopes")
	}
	for _, sc := range r.BrokerScopes {
		if !ValidScopeName(sc) {
			return Problem(EINVALID, "invalid-broker-scope", "broker scope %q is not a valid scope name", clip(sc, 100))
		}
	}
	return validateVolumes(r.Volumes)
}

// SessionLimits are the limits a session runs under.
type SessionLimits struct {
	CPUs        float64 `json:"cpus"`
	MemoryBytes int64   `json:"memory_bytes"` // the sandbox as a whole (host cgroup)
	// ProcessMemoryBytes is the address-space limit (RLIMIT_AS) of every
	// process started in the session, below MemoryBytes, so one command
	// that allocates too much fails alone instead of taking the session
	// down.
	ProcessMemoryBytes int64 `json:"process_memory_bytes"`
	DiskBytes          int64 `json:"disk_bytes"`
	Pids               int64 `json:"pids"`
	OutputBytes        int64 `json:"output_bytes"` // per stream of one exec or cell
	TimeoutS           int   `json:"timeout_s"`
	IdleTimeoutS       int   `json:"idle_timeout_s"`
	// MaxLifetimeS is the most a session may live from its creation; the
	// timeout can be extended up to it.
	MaxLifetimeS int `json:"max_lifetime_s"`
}

// SessionUsage is what a session used so far.
type SessionUsage struct {
	Execs         int64 `json:"execs"`
	CellRuns      int64 `json:"cell_runs"`
	CPUMS         int64 `json:"cpu_ms"`
	MemoryMB      int64 `json:"memory_mib"` // now (live sessions only)
	PeakMemoryMB  int64 `json:"peak_memory_mib"`
	BytesUploaded int64 `json:"uploaded_bytes"`
	BytesDownload int64 `json:"downloaded_bytes"`
}

// RunningExec is a program running in a session.
type RunningExec struct {
	PID         int       `json:"pid"`
	ExecutionID string    `json:"execution_id"`
	StartedAt   time.Time `json:"started_at"`
}

// Session is a long-lived sandbox of one tenant.
type Session struct {
	ID           string        `json:"session_id"`
	TenantID     string        `json:"tenant_id"`
	Image        string        `json:"image"`
	Size         SessionSize   `json:"size"`
	State        SessionState  `json:"state"`
	Limits       SessionLimits `json:"limits"`
	Network      NetworkPolicy `json:"network"`
	BrokerScopes []string      `json:"broker_scopes,omitempty"` // credential broker scopes its code may call
	Usage        SessionUsage  `json:"usage"`
	// Backend names the backend that runs the session's sandbox, and
	// StartSource how the sandbox was obtained (pool, restore or cold).
	Backend     string `json:"backend,omitempty"`
	StartSource string `json:"start_source,omitempty"`
	// SandboxID is the backend's ID of the session's sandbox, by which a
	// restarted server reattaches it: a pool member keeps the name it
	// was readied under. Empty in records older than the field, whose
	// sandbox is named "ss-" + ID.
	SandboxID      string `json:"-"`
	IdempotencyKey string `json:"idempotency_key,omitempty"`
	// RequestHash identifies the creating request, for idempotent retries.
	RequestHash  string     `json:"-"`
	CreatedAt    time.Time  `json:"created_at"`
	ExpiresAt    time.Time  `json:"expires_at"`
	LastActiveAt time.Time  `json:"last_active_at"`
	EndedAt      *time.Time `json:"ended_at,omitempty"`
	EndReason    string     `json:"end_reason,omitempty"` // one of the End* values
	EndDetail    string     `json:"end_detail,omitempty"`
	// EndLimit names the limit an ended session ran into (LimitMemory,
	// LimitWallTime, LimitIdle, LimitProcesses), and LastSample is its
	// last resource sample before the end; both are filled on reading an
	// ended session (SessionLimitOf, the metrics store).
	EndLimit   string        `json:"end_limit,omitempty"`
	LastSample *MetricSample `json:"last_sample,omitempty"`
	// PausedAt is when a paused session was paused.
	PausedAt *time.Time `json:"paused_at,omitempty"`
	// Lifecycle is what its timeouts do and whether requests resume it
	// (on_timeout "end" and no auto_resume when the request said none).
	Lifecycle SessionLifecycle `json:"lifecycle"`
	// Running lists the programs running now (live sessions only).
	Running []RunningExec `json:"running,omitempty"`
	// Volumes are the volumes the session has mounted (live sessions
	// only).
	Volumes []VolumeMount `json:"volumes,omitempty"`
}

// SessionFilter selects a page of a tenant's sessions, newest first.
type SessionFilter struct {
	TenantID string
	Limit    int
	Before   string // cursor: a session ID
	LiveOnly bool   // only sessions whose state is live
}

// SessionPage is one page of a tenant's sessions, newest first.
type SessionPage struct {
	Sessions   []*Session `json:"sessions"`
	NextCursor string     `json:"next_cursor,omitempty"`
}

// IdempotencyKey records which session a tenant's Idempotency-Key made, so
// a retry gets the same session.
type IdempotencyKey struct {
	TenantID    string
	Key         string
	RequestHash string
	SessionID   string
	CreatedAt   time.Time
	ExpiresAt   time.Time
}

// SessionStore keeps session records and idempotency keys. Every query is
// scoped to a tenant except those the node uses at start and for reaping.
type SessionStore interface {
	// CreateSession records a new session (state creating).
	CreateSession(ctx context.Context, s *Session) error
	// UpdateSession writes a session's mutable fields (state, expiry,
	// activity, usage, end). A session in a final state is ECONFLICT.
	UpdateSession(ctx context.Context, s *Session) error
	// Session returns one session of the tenant; ErrNotFound otherwise.
	Session(ctx context.Context, tenantID, id string) (*Session, error)
	ListSessions(ctx context.Context, f SessionFilter) ([]*Session, error)
	// LiveSessions returns every session of every tenant whose state is
	// live or destroying (used at start to end what a previous run left).
	LiveSessions(ctx context.Context) ([]*Session, error)

	// ClaimIdempotencyKey records k unless the tenant already has an
	// unexpired record for k.Key; then it returns that record and false.
	// An expired record is replaced.
	ClaimIdempotencyKey(ctx context.Context, k *IdempotencyKey) (*IdempotencyKey, bool, error)
	// ReleaseIdempotencyKey deletes the tenant's key if it still names
	// sessionID (a creation that failed frees its key for a retry).
	ReleaseIdempotencyKey(ctx context.Context, tenantID, key, sessionID string) error
	// DeleteExpiredIdempotencyKeys deletes keys expired at now.
	DeleteExpiredIdempotencyKeys(ctx context.Context, now time.Time) (int, error)
}

// Exec in a session.

// Command is the language recorded for a session exec given as an argv
// (cmd); one given as a shell line is recorded as Bash. It is not a
// language of /v1/execute.
const Command Language = "command"

// MaxStdinBytes bounds the stdin of a session exec.
const MaxStdinBytes = 1 << 20

// SessionExecRequest is the body of POST /v1/sessions/{id}/exec: a command
// (argv) or a shell line, run in the session's sandbox.
type SessionExecRequest struct {
	Cmd        []string          `json:"cmd,omitempty"`
	Shell      string            `json:"shell,omitempty"`
	Env        map[string]string `json:"env,omitempty"`
	Cwd        string            `json:"cwd,omitempty"`
	Stdin      string            `json:"stdin,omitempty"`
	TimeoutSec int               `json:"timeout_s,omitempty"`
	// KeepStdin leaves the program's stdin open after Stdin is written,
	// for WriteStdin and CloseStdin of the session service (the E2B
	// front-end's interactive commands). Not part of the HTTP API.
	KeepStdin bool `json:"-"`
}

// Validate checks a session exec request against the maximum timeout.
func (r *SessionExecRequest) Validate(maxTimeout time.Duration) error {
	switch {
	case len(r.Cmd) == 0 && r.Shell == "":
		return Problem(EINVALID, "missing-command", "one of cmd (an argv array) or shell (a command line) is required")
	case len(r.Cmd) > 0 && r.Shell != "":
		return Problem(EINVALID, "invalid-command", "give cmd or shell, not both")
	case len(r.Cmd) > 0 && r.Cmd[0] == "":
		return Problem(EINVALID, "invalid-command", "cmd[0] must name a program")
	case len(r.Cmd) > 4096:
		return Problem(EINVALID, "invalid-command", "cmd has more than 4096 arguments")
	}
	n := len(r.Shell)
	for _, a := range r.Cmd {
		if strings.ContainsRune(a, 0) {
			return Problem(EINVALID, "invalid-command", "cmd must not contain NUL bytes")
		}
		n += len(a)
	}
	if strings.ContainsRune(r.Shell, 0) {
		return Problem(EINVALID, "invalid-command", "shell must not contain NUL bytes")
	}
	for k, v := range r.Env {
		if !validEnvName(k) {
			return Problem(EINVALID, "invalid-env", "environment variable name %q is not valid (letters, digits and _, not starting with a digit)", k)
		}
		if strings.ContainsRune(v, 0) {
			return Problem(EINVALID, "invalid-env", "environment variable %s must not contain NUL bytes", k)
		}
		n += len(k) + len(v) + 1
	}
	if n > 256<<10 {
		return Problem(ETOOLARGE, "command-too-large", "command and environment are %d bytes; the limit is %d", n, 256<<10)
	}
	if strings.ContainsRune(r.Cwd, 0) || len(r.Cwd) > 4096 {
		return Problem(EINVALID, "invalid-path", "cwd is not a valid path")
	}
	if len(r.Stdin) > MaxStdinBytes {
		return Problem(ETOOLARGE, "stdin-too-large", "stdin is %d bytes; the limit is %d", len(r.Stdin), MaxStdinBytes)
	}
	max := int(maxTimeout / time.Second)
	if r.TimeoutSec < 0 || r.TimeoutSec > max {
		return Problem(EINVALID, "timeout-out-of-range", "timeout_s must be between 1 and %d (0 or absent means the default)", max)
	}
	return nil
}

func validEnvName(k string) bool {
	if k == "" || len(k) > 255 {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !(c == '_' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// ExecObserver sees a session exec as it happens (for streaming). Calls
// come from one goroutine at a time, in order.
type ExecObserver interface {
	Started(executionID string, pid int)
	Stdout(p []byte)
	Stderr(p []byte)
}

// Files in a session.

// FileEntry describes a file in a session's sandbox.
type FileEntry struct {
	Name    string    `json:"name"`
	Type    string    `json:"type"` // file, dir, symlink or other
	Size    int64     `json:"size_bytes"`
	Mode    string    `json:"mode"` // permission bits in octal, e.g. "0644"
	ModTime time.Time `json:"modified_at"`
}

// FileList is the answer of GET /v1/sessions/{id}/files?list=1.
type FileList struct {
	Path      string      `json:"path"`
	Entries   []FileEntry `json:"entries"`
	Truncated bool        `json:"truncated"`
}

// PutFileResult is the answer of a file upload.
type PutFileResult struct {
	Path string `json:"path"`
	Size int64  `json:"size_bytes"`
}

// Code contexts.

// ContextLanguage is the language of a code context.
type ContextLanguage string

const (
	ContextPython ContextLanguage = "python"
	ContextNode   ContextLanguage = "node"
)

// ContextLanguages lists the languages of code contexts.
var ContextLanguages = []ContextLanguage{ContextPython, ContextNode}

// Valid reports whether l is a context language.
func (l ContextLanguage) Valid() bool { return l == ContextPython || l == ContextNode }

// CreateContextRequest is the body of POST /v1/sessions/{id}/contexts.
type CreateContextRequest struct {
	Language ContextLanguage `json:"language"`
}

// CodeContext is a persistent interpreter in a session: variables, imports
// and open files persist between cells.
type CodeContext struct {
	ID        string          `json:"context_id"`
	SessionID string          `json:"session_id"`
	Language  ContextLanguage `json:"language"`
	State     string          `json:"state"` // idle, busy or dead
	Runs      int64           `json:"runs"`
	CreatedAt time.Time       `json:"created_at"`
}

// Code context states.
const (
	ContextIdle = "idle"
	ContextBusy = "busy"
	ContextDead = "dead"
)

// RunCellRequest is the body of POST .../contexts/{cid}/run.
type RunCellRequest struct {
	Code       string `json:"code"`
	TimeoutSec int    `json:"timeout_s,omitempty"`
}

// Validate checks a cell against the maximum timeout.
func (r *RunCellRequest) Validate(maxTimeout time.Duration) error {
	if len(r.Code) > MaxCodeBytes {
		return Problem(ETOOLARGE, "code-too-large", "code is %d bytes; the limit is %d", len(r.Code), MaxCodeBytes)
	}
	max := int(maxTimeout / time.Second)
	if r.TimeoutSec < 0 || r.TimeoutSec > max {
		return Problem(EINVALID, "timeout-out-of-range", "timeout_s must be between 1 and %d (0 or absent means the default)", max)
	}
	return nil
}

// CellError is an exception a cell raised.
type CellError struct {
	Name      string `json:"name"`
	Value     string `json:"value"`
	Traceback string `json:"traceback"`
}

// CellOutput is one rich output of a cell: a figure as PNG (base64), a
// table as HTML, or text.
type CellOutput struct {
	Type string `json:"type"` // image/png, text/html or text/plain
	Data string `json:"data"` // base64 for image/png, else the text
}

// CellResult is what a cell did.
type CellResult struct {
	ContextID string `json:"context_id"`
	// ExecutionID is the cell's execution record.
	ExecutionID     string       `json:"execution_id,omitempty"`
	Stdout          string       `json:"stdout"`
	Stderr          string       `json:"stderr"`
	StdoutTruncated bool         `json:"stdout_truncated"`
	StderrTruncated bool         `json:"stderr_truncated"`
	Value           string       `json:"value,omitempty"` // text of the final expression's value
	Error           *CellError   `json:"error,omitempty"`
	Outputs         []CellOutput `json:"outputs"`
	OutputsDropped  int          `json:"outputs_dropped,omitempty"` // rich outputs left out by the size cap
	DurationMS      int64        `json:"duration_ms"`
	TimedOut        bool         `json:"timed_out"`
	// EndedBy and LimitsHit as in Execution.
	EndedBy   string   `json:"ended_by,omitempty"`
	LimitsHit []string `json:"limits_hit,omitempty"`
	// ContextState is the context's state after the cell: idle, or dead
	// when the interpreter crashed (restart it to go on).
	ContextState string `json:"context_state"`
	// Findings are what the guard found in the cell's code.
	Findings []GuardFinding `json:"findings"`
}

// CellObserver sees a cell as it happens (for streaming): Started once the
// request is accepted and the cell is handed to its context, then its
// output.
type CellObserver interface {
	Started(contextID string)
	Stdout(p []byte)
	Stderr(p []byte)
}

// SessionService runs sessions. The session package implements it; the
// HTTP layer depends only on this. Every method is scoped to the tenant:
// another tenant's session is ENOTFOUND.
type SessionService interface {
	// CreateSession makes a session, or with an idempotency key returns
	// the one a previous request with that key made (created false).
	CreateSession(ctx context.Context, tenant *Tenant, req CreateSessionRequest, idempotencyKey string) (s *Session, created bool, err error)
	Session(ctx context.Context, tenant *Tenant, id string) (*Session, error)
	ListSessions(ctx context.Context, tenant *Tenant, f SessionFilter) (*SessionPage, error)
	DeleteSession(ctx context.Context, tenant *Tenant, id string) (*Session, error)
	// ExtendSession sets the session to expire timeoutS seconds from now,
	// within the tenant's maximum lifetime.
	ExtendSession(ctx context.Context, tenant *Tenant, id string, timeoutS int) (*Session, error)

	Exec(ctx context.Context, tenant *Tenant, id string, req SessionExecRequest, obs ExecObserver) (*Execution, error)
	SignalExec(ctx context.Context, tenant *Tenant, id string, pid int, signal int) error

	PutFile(ctx context.Context, tenant *Tenant, id, path string, size int64, r io.Reader) (*PutFileResult, error)
	// GetFile writes the file to the writer open returns once the file is
	// known to exist (so errors before that are problems, not a cut body).
	GetFile(ctx context.Context, tenant *Tenant, id, path string, open func(size int64) io.Writer) (int64, error)
	ListFiles(ctx context.Context, tenant *Tenant, id, path string) (*FileList, error)
	DeleteFile(ctx context.Context, tenant *Tenant, id, path string) error

	CreateContext(ctx context.Context, tenant *Tenant, id string, req CreateContextRequest) (*CodeContext, error)
	ListContexts(ctx context.Context, tenant *Tenant, id string) ([]*CodeContext, error)
	DeleteContext(ctx context.Context, tenant *Tenant, id, contextID string) error
	RestartContext(ctx context.Context, tenant *Tenant, id, contextID string) (*CodeContext, error)
	RunCell(ctx context.Context, tenant *Tenant, id, contextID string, req RunCellRequest, obs CellObserver) (*CellResult, error)
}
