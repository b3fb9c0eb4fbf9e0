package quota

import (
	"context"
	"errors"
	"time"
)

// Shared keeps, for every node of a fleet at once, what each tenant
// holds (its live sandboxes' claims) and what it started in the last
// minute. A Ledger with one (Config.Shared) checks the concurrent quotas
// and the executions per minute against the whole fleet's use; without
// one it keeps them in its own memory, as a lone node does.
//
// EtcdCounters is the fleet's implementation.
type Shared interface {
	// Take calls check with the tenant's counters as the whole fleet has
	// them and, if it returns nil, records r, both as one atomic step: no
	// other node's Take comes between. A check's error is returned as it
	// is; a counter that cannot be reached is ErrSharedUnavailable. A
	// record with Force is written without asking check.
	Take(ctx context.Context, tenantID string, r Record, check func(SharedState) error) error
	// Drop removes the hold of r and, with unexec, its execution from
	// the minute's window (a run that never ran).
	Drop(ctx context.Context, tenantID string, r Record, unexec bool) error
	// State reads the tenant's counters.
	State(ctx context.Context, tenantID string) (SharedState, error)
}

// ErrSharedUnavailable is a shared counter that cannot be reached or
// agreed on in time: the ledger refuses new work rather than count
// without the rest of the fleet.
var ErrSharedUnavailable = errors.New("quota: the fleet's shared counters are unavailable")

// Record is one hold (a live sandbox's claim) or one execution, as the
// shared counters keep it.
type Record struct {
	// ID names the hold; "" for an execution that holds nothing (an
	// exec in a session).
	ID          string
	Kind        Kind
	MilliCPU    int64
	MemoryBytes int64
	// Admitted is when the hold was taken or the execution started.
	Admitted time.Time
	// Deadline is when the sandbox ends at the latest; zero if unknown.
	Deadline time.Time
	// Exec counts one execution at Admitted in the minute's window.
	Exec bool
	// Force records without a check (a session taken back at a start).
	Force bool
}

// SharedState is a tenant's counters across the fleet.
type SharedState struct {
	Holds []Record
	// Execs are the executions started in about the last minute, oldest
	// first (the check drops those that left the window).
	Execs []time.Time
}
