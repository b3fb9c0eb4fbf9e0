package airlock

import (
	"context"
	"io"
	"time"
)

// Problem types of a store that cannot serve for now (code EUNAVAILABLE,
// a 503 with Retry-After): busy is a lock held past the store's wait,
// unavailable a store that cannot be reached, read or written. Every
// store implementation returns these, so a client sees one problem
// whichever store the node runs on.
const (
	ProblemStoreBusy        = "store-busy"
	ProblemStoreUnavailable = "store-unavailable"
)

// ExecutionCounts are one tenant's executions as a store has them (what
// the operator's usage report shows).
type ExecutionCounts struct {
	// RunningOneShot counts the one-shot executions recorded as running.
	RunningOneShot int
	// Since counts the executions (one-shot, session execs and cells)
	// recorded at or after the time asked about.
	Since int
}

// ExecutionCounter counts executions by tenant.
type ExecutionCounter interface {
	// ExecutionCounts returns, by tenant, the one-shot executions
	// recorded as running and the executions recorded since the time;
	// tenants with neither are left out.
	ExecutionCounts(ctx context.Context, since time.Time) (map[string]ExecutionCounts, error)
}

// Store keeps metadata: tenants, keys, executions and the artifact index.
// The sqlite package implements it (the single-node default) and so does
// the postgres package (a fleet's shared records).
type Store interface {
	CreateTenant(ctx context.Context, t *Tenant) error
	TenantByName(ctx context.Context, name string) (*Tenant, error)
	TenantByID(ctx context.Context, id string) (*Tenant, error)
	ListTenants(ctx context.Context) ([]*Tenant, error)
	CountTenants(ctx context.Context) (int, error)
	// SetTenantFirstParty marks a tenant first-party or not, which sets
	// its isolation floor (see Tenant.IsolationFloor); ErrNotFound if the
	// tenant does not exist.
	SetTenantFirstParty(ctx context.Context, tenantID string, firstParty bool) error
	// SetTenantIsolation sets the operator's isolation floor of a tenant
	// ("" for none; see Tenant.Isolation); EINVALID for an unknown level,
	// ErrNotFound if the tenant does not exist.
	SetTenantIsolation(ctx context.Context, tenantID string, i Isolation) error

	KeyStore
	// TenantByKeyHash resolves the hash of a usable tenant key (not
	// revoked, not expired) to its tenant; ErrNotFound otherwise.
	TenantByKeyHash(ctx context.Context, hash string) (*Tenant, error)

	// CreateExecution records a run as it starts (status running).
	CreateExecution(ctx context.Context, e *Execution) error
	// FinishExecution writes the outcome and the artifact index at once.
	FinishExecution(ctx context.Context, e *Execution) error
	// Execution returns one execution of the tenant; ErrNotFound otherwise.
	Execution(ctx context.Context, tenantID, id string) (*Execution, error)
	ListExecutions(ctx context.Context, f ExecutionFilter) ([]*Execution, error)
	// FailRunningExecutions marks failed, with the reason, every running
	// execution that is not of a live session (used by the reconciler at
	// start, after the sessions were recovered) and returns how many.
	FailRunningExecutions(ctx context.Context, reason string) (int, error)
	// RunningExecutions returns the executions of the session that are
	// recorded as running, oldest first.
	RunningExecutions(ctx context.Context, sessionID string) ([]*Execution, error)

	// RecordPhase adds one phase's time to a finished execution (the
	// destroy phase ends after the response was sent).
	RecordPhase(ctx context.Context, tenantID, id, phase string, ms float64) error

	// Artifact returns one artifact of the tenant; ErrNotFound otherwise.
	Artifact(ctx context.Context, tenantID, id string) (*Artifact, error)

	Close() error
}

// Blobs stores artifact bytes by key. The blobdir package implements it on
// a local directory; an S3-compatible one can later.
type Blobs interface {
	Put(ctx context.Context, key string, r io.Reader) (int64, error)
	Open(ctx context.Context, key string) (io.ReadSeekCloser, int64, error)
	Delete(ctx context.Context, key string) error
}
