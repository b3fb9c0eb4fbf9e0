package airlock

import (
	"context"
	"time"
)

// AuditEntry is one control-plane action (a tenant made or changed, a key
// made or revoked, a grant set) and its result: who (the key's ID and
// name), what, when, and how it ended.
type AuditEntry struct {
	ID string    `json:"audit_id"`
	At time.Time `json:"occurred_at"`
	// KeyID and KeyName are the key that asked; Role its role; TenantID
	// its tenant ("" for an operator key).
	KeyID    string `json:"key_id"`
	KeyName  string `json:"key_name"`
	Role     Role   `json:"role"`
	TenantID string `json:"tenant_id,omitempty"`
	// Action names what was asked, e.g. "tenant.create", "key.revoke".
	Action string `json:"action"`
	// Target is what it was asked of: a tenant's name, a key's ID.
	Target string `json:"target,omitempty"`
	// Status is the HTTP status of the answer; Result "ok" or the
	// problem type of a refusal.
	Status int    `json:"status"`
	Result string `json:"result"`
	// Detail is a short, secret-free description (the fields a PATCH set).
	Detail string `json:"detail,omitempty"`
}

// AuditFilter selects audit entries, newest first.
type AuditFilter struct {
	// Before, when set, lists entries older than the entry with this ID
	// (the next page).
	Before string
	// Action, when set, lists only that action.
	Action string
	// Limit bounds the page; the store's default if zero.
	Limit int
}

// AuditStore keeps the audit log.
type AuditStore interface {
	// RecordAudit appends e; an empty ID gets a new one, a zero At the
	// store's time.
	RecordAudit(ctx context.Context, e *AuditEntry) error
	// ListAudit returns entries, newest first.
	ListAudit(ctx context.Context, f AuditFilter) ([]*AuditEntry, error)
}

// BrokerGrantStore keeps which tenants may use which broker scopes.
type BrokerGrantStore interface {
	// BrokerGrants returns the scopes granted to the tenant, sorted.
	BrokerGrants(ctx context.Context, tenantID string) ([]string, error)
	// SetBrokerGrants replaces the tenant's grants; ErrNotFound if there
	// is no such tenant.
	SetBrokerGrants(ctx context.Context, tenantID string, scopes []string) error
}

// TenantDeleter removes a tenant and everything recorded of it (keys,
// sessions, executions, artifacts' index, events, quotas, grants).
type TenantDeleter interface {
	DeleteTenant(ctx context.Context, tenantID string) error
}

// ProblemBrokerScopeNotGranted refuses a session that names a broker
// scope its tenant was not granted (403).
const ProblemBrokerScopeNotGranted = "broker-scope-not-granted"
