package airlock

import (
	"context"
	"time"
)

// QuotaUsage is a tenant's use of one quota, as GET /v1/usage shows it.
// Limit and Remaining are -1 for a quota without a limit.
type QuotaUsage struct {
	// Quota names the quota (package quota lists them: sessions, runs,
	// executions_per_minute, vcpu, memory, sandbox_seconds_per_day,
	// egress_bytes_per_day).
	Quota string `json:"quota"`
	// Unit is what Limit, Used and Remaining count: sessions, runs,
	// executions, millivcpu, bytes or seconds.
	Unit string `json:"unit"`
	// Window says over what the use is counted: "concurrent" (what is
	// held now), "minute" (the last 60 seconds) or "day" (the UTC day).
	Window    string `json:"window"`
	Limit     int64  `json:"limit"`
	Used      int64  `json:"used"`
	Remaining int64  `json:"remaining"`
	// Source says where the limit comes from: "default" (the operator's)
	// or "tenant" (an override for this tenant).
	Source string `json:"source"`
	// ResetsAt is when a daily quota's count starts again (the next UTC
	// midnight).
	ResetsAt *time.Time `json:"resets_at,omitempty"`
}

// Usage is a tenant's use of all its quotas.
type Usage struct {
	TenantID string       `json:"tenant_id"`
	At       time.Time    `json:"measured_at"`
	Quotas   []QuotaUsage `json:"quotas"`
}

// UsageService answers GET /v1/usage.
type UsageService interface {
	Usage(ctx context.Context, tenant *Tenant) (*Usage, error)
}

// DailyUsage is what a tenant's sandboxes used on one UTC day.
type DailyUsage struct {
	// SandboxMillis is the wall time sandboxes of the tenant existed, in
	// milliseconds, one-shot and session alike.
	SandboxMillis int64 `json:"sandbox_ms"`
	// EgressBytes is what they moved through the egress proxy, up and
	// down together.
	EgressBytes int64 `json:"egress_bytes"`
}

// UsageDelta is an addition to one tenant's counters of one day.
type UsageDelta struct {
	TenantID string
	Day      string // UTC, "2006-01-02"
	DailyUsage
}

// QuotaStore keeps the tenants' quota overrides and their daily usage
// counters. The sqlite package implements it.
type QuotaStore interface {
	// TenantQuotas returns every override: tenant ID, then quota name,
	// to the limit (-1 for no limit).
	TenantQuotas(ctx context.Context) (map[string]map[string]int64, error)
	// SetTenantQuota sets one override; ErrNotFound if the tenant does
	// not exist.
	SetTenantQuota(ctx context.Context, tenantID, quota string, limit int64) error
	// DeleteTenantQuota drops one override, so the operator's default
	// applies again; dropping one that is not set is not an error.
	DeleteTenantQuota(ctx context.Context, tenantID, quota string) error
	// AddUsage adds the deltas to the daily counters, all or none.
	AddUsage(ctx context.Context, deltas []UsageDelta) error
	// DailyUsage returns each tenant's counters of one UTC day
	// ("2006-01-02"); tenants without any are left out.
	DailyUsage(ctx context.Context, day string) (map[string]DailyUsage, error)
}
