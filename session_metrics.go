package airlock

import (
	"context"
	"time"
)

// MetricSample is one reading of a session's resource use, taken on the
// host outside the sandbox.
type MetricSample struct {
	At time.Time `json:"at"`
	// CPUPct is the CPU the sandbox used since the previous sample, in
	// percent of the session's CPU limit (100 = all of its limit; with a
	// limit of one CPU, one core fully busy).
	CPUPct float64 `json:"cpu_pct"`
	// MemoryBytes is the sandbox's memory in use (its cgroup's usage).
	MemoryBytes int64 `json:"memory_bytes"`
	// DiskBytes is the space used on the sandbox's own disk (its
	// /workspace and /tmp).
	DiskBytes int64 `json:"disk_bytes"`
	// NetRxBytes and NetTxBytes count the bytes the sandbox received and
	// sent on its network link since it started (0 without a network).
	NetRxBytes int64 `json:"net_rx_bytes"`
	NetTxBytes int64 `json:"net_tx_bytes"`
}

// MetricsFilter selects the samples of one session taken in [Start, End]
// (a zero bound is open), oldest first, at most Limit.
type MetricsFilter struct {
	TenantID  string
	SessionID string
	Start     time.Time
	End       time.Time
	Limit     int
}

// SessionMetrics is the answer of GET /v1/sessions/{id}/metrics.
type SessionMetrics struct {
	Samples []MetricSample `json:"samples"`
}

// SessionMetricsStore keeps the samples of sessions: for their life and
// for a while after they end.
type SessionMetricsStore interface {
	// AddSessionSample records one sample of a tenant's session.
	AddSessionSample(ctx context.Context, tenantID, sessionID string, s MetricSample) error
	// SessionSamples returns the samples f selects, oldest first.
	SessionSamples(ctx context.Context, f MetricsFilter) ([]MetricSample, error)
	// DeleteSessionSamplesBefore deletes the samples taken before t of
	// sessions that ended before t (or have no record) and returns how
	// many: a session's samples live as long as it does and then until t
	// passes its end.
	DeleteSessionSamplesBefore(ctx context.Context, t time.Time) (int64, error)
}

// SessionMetricsService is implemented by session services that sample
// their sessions.
type SessionMetricsService interface {
	// SessionMetrics returns the samples of the tenant's session (live or
	// ended) that f selects; another tenant's session is not found.
	SessionMetrics(ctx context.Context, tenant *Tenant, id string, f MetricsFilter) (*SessionMetrics, error)
}

// Limit names (Session.Limit, Execution.EndedBy and LimitsHit) beside
// LimitWallTime, LimitMemory and the others: the session's idle timeout.
const LimitIdle = "idle"

// SessionLimitOf names the limit a session's end reason says it ran
// into ("" when it did not end by a limit).
func SessionLimitOf(endReason string) string {
	switch endReason {
	case EndOutOfMemory:
		return LimitMemory
	case EndTimeout:
		return LimitWallTime
	case EndIdle:
		return LimitIdle
	case AbuseReason(DetectorForkBomb):
		return LimitProcesses
	}
	return ""
}
