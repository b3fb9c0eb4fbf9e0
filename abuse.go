package airlock

import (
	"context"
	"strings"
	"time"
)

// What ended a run (Execution.EndedBy) or was reached by it
// (Execution.LimitsHit). Every one is enforced outside the sandbox.
const (
	LimitWallTime    = "wall_time"    // killed at its timeout
	LimitMemory      = "memory"       // the sandbox ran out of memory and was killed
	LimitProcesses   = "processes"    // a fork was refused at the process limit
	LimitDisk        = "disk"         // the workspace's disk filled up
	LimitOutput      = "output"       // output past the cap was dropped
	LimitEgressBytes = "egress_bytes" // the network byte budget is used up; connections were cut
	LimitCPUSeconds  = "cpu_seconds"  // reserved: no CPU-seconds budget exists besides wall time x vCPUs (see README)
)

// EndedAgentKilled is the EndedBy of a run during which the sandbox's
// agent, its first process, was killed and the sandbox ended with it
// while no limit or detector was at work: the code did it (kill -9 1
// runs as the agent's user) or brought it about, so the run is the
// code's result (status failed, exit code 137), not a failure of the
// service to retry.
const EndedAgentKilled = "agent_killed"

// AbusePrefix starts the EndedBy of a run, and the EndReason of a
// session, that an abuse detector ended: "abuse:mining".
const AbusePrefix = "abuse:"

// AbuseReason is the end reason of a sandbox ended by detector.
func AbuseReason(detector string) string { return AbusePrefix + detector }

// IsAbuseReason reports whether reason names an abuse detector.
func IsAbuseReason(reason string) bool { return strings.HasPrefix(reason, AbusePrefix) }

// Abuse detectors.
const (
	DetectorMining    = "mining"
	DetectorScanning  = "scanning"
	DetectorForkBomb  = "fork-bomb"
	DetectorDNSTunnel = "dns-tunnel"
)

// Detectors lists the detectors in a stable order.
var Detectors = []string{DetectorMining, DetectorScanning, DetectorForkBomb, DetectorDNSTunnel}

// Actions recorded with an abuse event.
const (
	ActionKilled      = "killed"             // the sandbox was killed
	ActionQuarantined = "killed,quarantined" // killed, and the tenant quarantined
	ActionRecorded    = "recorded"           // only recorded (the response is off, or the sandbox had ended)
)

// ProblemTenantQuarantined is the problem type (403) of a new run or
// session of a quarantined tenant.
const ProblemTenantQuarantined = "tenant-quarantined"

// AbuseEvent is one decision of an abuse detector.
type AbuseEvent struct {
	ID          string `json:"event_id"`
	TenantID    string `json:"tenant_id"`
	SessionID   string `json:"session_id,omitempty"`
	ExecutionID string `json:"execution_id,omitempty"`
	SandboxID   string `json:"-"`
	Detector    string `json:"detector"`
	// Summary says in a sentence what was seen.
	Summary string `json:"summary"`
	// Evidence is the figures the detector measured (CPU fraction,
	// window, distinct ports, pool name matched, ...): never a secret.
	Evidence map[string]any `json:"evidence"`
	Action   string         `json:"action"`
	Time     time.Time      `json:"occurred_at"`
}

// AbuseEventFilter selects a page of abuse events, newest first. An empty
// TenantID (the operator's view) lists every tenant's.
type AbuseEventFilter struct {
	TenantID string
	Limit    int
	Before   string // cursor: an event ID; list those recorded before it
}

// AbuseEventPage is one page of abuse events, newest first.
type AbuseEventPage struct {
	Events     []*AbuseEvent `json:"events"`
	NextCursor string        `json:"next_cursor,omitempty"`
}

// Quarantine is a tenant refused new runs and sessions.
type Quarantine struct {
	TenantID string    `json:"tenant_id"`
	Reason   string    `json:"reason"`
	EventID  string    `json:"event_id,omitempty"`
	Since    time.Time `json:"since"`
}

// AbuseStore keeps abuse events and quarantines.
type AbuseStore interface {
	// RecordAbuseEvent appends an event; an empty ID gets a new one.
	RecordAbuseEvent(ctx context.Context, ev *AbuseEvent) error
	ListAbuseEvents(ctx context.Context, f AbuseEventFilter) ([]*AbuseEvent, error)
	// QuarantineTenant quarantines a tenant (again: the reason is
	// replaced); ErrNotFound if there is no such tenant.
	QuarantineTenant(ctx context.Context, q *Quarantine) error
	// UnquarantineTenant lifts a quarantine; false if there was none.
	UnquarantineTenant(ctx context.Context, tenantID string) (bool, error)
	// TenantQuarantine returns the tenant's quarantine, nil if none.
	TenantQuarantine(ctx context.Context, tenantID string) (*Quarantine, error)
}

// Watched is a sandbox an abuse monitor watches while it is held.
type Watched struct {
	Sandbox     Sandbox
	TenantID    string
	SessionID   string // "" for a one-shot run
	ExecutionID string // the one-shot run's execution
	Limits      Limits
}

// Watchdog is the node's abuse monitor as the runs and sessions see it.
type Watchdog interface {
	// Watch starts watching a held sandbox; stop ends it.
	Watch(w Watched) (stop func())
	// Output tells the monitor the sandbox's program printed n bytes.
	Output(sandboxID string, n int)
	// KilledBy returns the end reason (AbuseReason) of a sandbox a
	// detector killed, "" otherwise.
	KilledBy(sandboxID string) string
}

// NoWatchdog watches nothing.
type NoWatchdog struct{}

var _ Watchdog = NoWatchdog{}

func (NoWatchdog) Watch(Watched) func()   { return func() {} }
func (NoWatchdog) Output(string, int)     {}
func (NoWatchdog) KilledBy(string) string { return "" }

// CPUWaiter is implemented by sandboxes that can tell how long their live
// host threads have waited for a CPU (on a busy host a program gets less
// than its quota): the abuse monitor's measure of demand. It costs more
// than Stats (a file per thread), so it is a method of its own.
type CPUWaiter interface {
	CPUWait(ctx context.Context) time.Duration
}

// Killer is implemented by sandboxes that can end every process inside
// at once without removing anything: Done closes, the workspace stays
// readable until Destroy.
type Killer interface {
	Kill(ctx context.Context) error
}
