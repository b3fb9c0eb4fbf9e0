package airlock

import (
	"context"
	"time"
)

// Language is the language of a one-shot execution.
type Language string

const (
	Python Language = "python"
	Bash   Language = "bash"
	Node   Language = "node"
	SQL    Language = "sql"
)

// Languages lists the supported languages in a stable order.
var Languages = []Language{Python, Bash, Node, SQL}

// Valid reports whether l is a supported language.
func (l Language) Valid() bool {
	for _, x := range Languages {
		if l == x {
			return true
		}
	}
	return false
}

// MaxCodeBytes caps the code of one execution.
const MaxCodeBytes = 1 << 20

// ExecuteRequest is the body of POST /v1/execute.
type ExecuteRequest struct {
	Language     Language `json:"language"`
	Code         string   `json:"code"`
	TimeoutSec   int      `json:"timeout_s,omitempty"`
	AllowNetwork bool     `json:"allow_network,omitempty"` // the tenant's default allow list (operator config)
	Image        string   `json:"image,omitempty"`
	// Template names a template (the tenant's, else the operator's) to
	// run from instead of an image.
	Template string `json:"template,omitempty"`
	// Isolation asks for a level (see ChooseBackend); empty means the
	// node's default backend.
	Isolation Isolation `json:"isolation,omitempty"`
}

// How a sandbox was obtained for an execution.
const (
	StartPool    = "pool"    // taken from the warm pool, already running
	StartRestore = "restore" // restored from the image's base snapshot on demand
	StartCold    = "cold"    // booted from the image
)

// Phases of an execution, as keys of Execution.Phases.
const (
	PhaseAcquire = "acquire"
	PhaseHandIn  = "hand_in"
	PhaseRun     = "run"
	PhaseCollect = "collect"
	PhaseDestroy = "destroy"
)

// ExecutionStatus is where a recorded execution stands.
type ExecutionStatus string

const (
	StatusRunning   ExecutionStatus = "running"
	StatusCompleted ExecutionStatus = "completed"
	StatusFailed    ExecutionStatus = "failed" // the service failed, not the user's code
	// StatusBlocked: the guard refused the code (tenant policy block);
	// nothing ran and no sandbox was taken. Findings says why.
	StatusBlocked ExecutionStatus = "blocked"
)

// Execution is one run: what was asked, what came out, and how.
type Execution struct {
	ID                string          `json:"execution_id"`
	TenantID          string          `json:"tenant_id"`
	SessionID         string          `json:"session_id,omitempty"`
	AgentID           string          `json:"agent_id,omitempty"`
	Language          Language        `json:"language"`
	Image             string          `json:"image"`
	CodeSHA256        string          `json:"code_sha256"`
	Status            ExecutionStatus `json:"status"`
	ExitCode          int             `json:"exit_code"`
	Stdout            string          `json:"stdout"`
	Stderr            string          `json:"stderr"`
	StdoutTruncated   bool            `json:"stdout_truncated"`
	StderrTruncated   bool            `json:"stderr_truncated"`
	DurationMS        int64           `json:"duration_ms"`
	PeakMemoryMB      int64           `json:"peak_memory_mib"`
	TimedOut          bool            `json:"timed_out"`
	OOMKilled         bool            `json:"oom_killed"`
	HadNetworkAttempt bool            `json:"had_network_attempt"`
	// EndedBy names the limit that ended the program (LimitWallTime,
	// LimitMemory, ...) or the abuse detector that killed its sandbox
	// (AbuseReason); "" when it ended on its own.
	EndedBy string `json:"ended_by,omitempty"`
	// LimitsHit lists the limits the program reached, fatal or not
	// (output past its cap, a full disk, a refused fork, ...).
	LimitsHit []string `json:"limits_hit,omitempty"`
	// LastSample is the last reading of the run's resource use (taken
	// every 250 ms while a one-shot program runs) before the limit in
	// EndedBy ended it; nil when no limit ended it, or for a session's
	// exec (the session's own samples are in its metrics).
	LastSample *MetricSample `json:"last_sample,omitempty"`
	Error      string        `json:"error,omitempty"` // set when Status is failed
	Artifacts  []Artifact    `json:"artifacts"`
	// ArtifactsTruncated is set when files were left out by the caps.
	ArtifactsTruncated bool `json:"artifacts_truncated,omitempty"`
	// StartSource says how the sandbox was obtained: StartPool,
	// StartRestore or StartCold.
	StartSource string `json:"start_source,omitempty"`
	// Backend names the backend that ran the code (gvisor, namespaces).
	Backend string `json:"backend,omitempty"`
	// Accelerator is how a microVM backend's guest ran: "kvm" (hardware
	// virtualisation) or "tcg" (QEMU's emulator, same isolation, much
	// slower); empty for the other backends.
	Accelerator string `json:"accelerator,omitempty"`
	// Phases are the milliseconds spent in each phase: acquire, hand_in,
	// run, collect, destroy (destroy is recorded after the response).
	Phases map[string]float64 `json:"phases_ms,omitempty"`
	// Findings are what the guard found in the code before it ran
	// (empty when it found nothing or the tenant's policy is off).
	Findings   []GuardFinding `json:"findings"`
	CreatedAt  time.Time      `json:"created_at"`
	FinishedAt *time.Time     `json:"finished_at,omitempty"`
	// TraceID is the W3C trace ID (32 hex digits) of the request that
	// made the execution, when it was traced or carried a traceparent.
	TraceID string `json:"trace_id,omitempty"`
}

// Artifact is a file the code created or changed in the workspace.
type Artifact struct {
	ID          string `json:"artifact_id"`
	ExecutionID string `json:"-"`
	TenantID    string `json:"-"`
	Filename    string `json:"filename"`
	SizeBytes   int64  `json:"size_bytes"`
	ContentType string `json:"content_type"`
	SHA256      string `json:"sha256"`
	URL         string `json:"url,omitempty"`
}

// ExecutionFilter selects a page of a tenant's executions, newest first.
type ExecutionFilter struct {
	TenantID string
	Limit    int
	Before   string // cursor: an execution ID; list those created before it
}

// Executor runs one-shot executions. The manager implements it; the HTTP
// layer depends only on this.
type Executor interface {
	Execute(ctx context.Context, tenant *Tenant, agentID string, req ExecuteRequest) (*Execution, error)
}

// ExecutionPage is one page of a tenant's executions, newest first.
// NextCursor, when set, is passed as ?before= to get the next page.
type ExecutionPage struct {
	Executions []*Execution `json:"executions"`
	NextCursor string       `json:"next_cursor,omitempty"`
}

// Validate checks a request against the operator's maximum timeout.
// Unknown images are the resolver's to report.
func (r *ExecuteRequest) Validate(maxTimeout time.Duration) error {
	if r.Language == "" {
		return Problem(EINVALID, "missing-language", "language is required (one of python, bash, node, sql)")
	}
	if !r.Language.Valid() {
		return Problem(EINVALID, "unknown-language", "unknown language %q (one of python, bash, node, sql)", r.Language)
	}
	if len(r.Code) > MaxCodeBytes {
		return Problem(ETOOLARGE, "code-too-large", "code is %d bytes; the limit is %d", len(r.Code), MaxCodeBytes)
	}
	max := int(maxTimeout / time.Second)
	if r.TimeoutSec < 0 || r.TimeoutSec > max {
		return Problem(EINVALID, "timeout-out-of-range", "timeout_s must be between 1 and %d (0 or absent means the default)", max)
	}
	if r.Isolation != "" && !r.Isolation.Valid() {
		return Problem(EINVALID, ProblemUnknownIsolation, "unknown isolation %q (one of %s)", r.Isolation, isolationNames())
	}
	return nil
}

// ArtifactBlobKey is where an artifact's bytes live in Blobs.
func ArtifactBlobKey(a *Artifact) string {
	return "artifacts/" + a.TenantID + "/" + a.ExecutionID + "/" + a.ID
}
