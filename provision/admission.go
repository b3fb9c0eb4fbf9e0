package provision

import (
	"context"
	"sync"
	"time"

	"github.com/airlockhq/airlock"
)

// Kind says which admission bounds a sandbox.
type Kind int

const (
	// OneShot is a sandbox for one /v1/execute run.
	OneShot Kind = iota
	// Session is a sandbox held by a session for its life.
	Session
)

func (k Kind) String() string {
	if k == Session {
		return "session"
	}
	return "one-shot"
}

// Problem types of admission.
const (
	ProblemNodeBusy     = "node-busy"
	ProblemTenantBusy   = "tenant-busy"
	ProblemSessionQuota = "session-quota"
	ProblemShuttingDown = "shutting-down"
)

// Retry-After hints: a one-shot slot frees within seconds, a session
// only when one ends.
const (
	oneShotRetry = 2 * time.Second
	sessionRetry = 30 * time.Second
)

// admission counts what holds or waits for room, per node and per tenant.
type admission struct {
	cfg   Admission
	slots chan struct{} // one-shot slots of the node

	mu       sync.Mutex
	oneShot  map[string]int // by tenant: holding or waiting
	sessions map[string]int // by tenant: live
	live     int            // sessions on the node
	queued   int            // one-shot runs waiting for a slot
	closed   bool
}

func newAdmission(cfg Admission) *admission {
	return &admission{
		cfg:      cfg,
		slots:    make(chan struct{}, cfg.OneShot),
		oneShot:  map[string]int{},
		sessions: map[string]int{},
	}
}

// admit takes room for one sandbox of kind for the tenant. A one-shot run
// waits up to QueueTimeout for a node slot; everything else answers at
// once. force admits whatever the limits say (a session that existed
// before a restart is counted, never refused).
func (a *admission) admit(ctx context.Context, kind Kind, tenantID string, force bool) error {
	a.mu.Lock()
	if a.closed && !force {
		a.mu.Unlock()
		return airlock.Problem(airlock.EUNAVAILABLE, ProblemShuttingDown, "the server is shutting down; retry in a moment").RetryLater(5 * time.Second)
	}
	if kind == Session {
		defer a.mu.Unlock()
		switch {
		case force:
		case a.sessions[tenantID] >= a.cfg.SessionsPerTenant:
			return airlock.Problem(airlock.ERATELIMITED, ProblemSessionQuota, "the tenant has its maximum of %d live sessions; delete one first", a.cfg.SessionsPerTenant).RetryLater(sessionRetry)
		case a.live >= a.cfg.Sessions:
			return airlock.Problem(airlock.EUNAVAILABLE, ProblemNodeBusy, "this node runs its maximum of %d sessions; retry later", a.cfg.Sessions).RetryLater(sessionRetry)
		}
		a.live++
		a.sessions[tenantID]++
		return nil
	}
	if !force && a.oneShot[tenantID] >= a.cfg.tenantSlots() {
		n := a.oneShot[tenantID]
		a.mu.Unlock()
		return airlock.Problem(airlock.ERATELIMITED, ProblemTenantBusy,
			"the tenant already runs or waits for %d one-shot executions, its share of this node's %d slots; retry when one has finished", n, a.cfg.OneShot).RetryLater(oneShotRetry)
	}
	select {
	case a.slots <- struct{}{}: // a free slot: no queue
		a.oneShot[tenantID]++
		a.mu.Unlock()
		return nil
	default:
	}
	if a.queued >= a.cfg.MaxQueue {
		a.mu.Unlock()
		return airlock.Problem(airlock.EUNAVAILABLE, ProblemNodeBusy,
			"all %d execution slots of this node are busy and %d requests wait already; retry later", a.cfg.OneShot, a.cfg.MaxQueue).RetryLater(oneShotRetry)
	}
	a.oneShot[tenantID]++
	a.queued++
	a.mu.Unlock()
	unqueue := func() {
		a.mu.Lock()
		a.queued--
		a.mu.Unlock()
	}
	t := time.NewTimer(a.cfg.QueueTimeout)
	defer t.Stop()
	select {
	case a.slots <- struct{}{}:
		unqueue()
		return nil
	case <-t.C:
		unqueue()
		a.drop(kind, tenantID, false)
		return airlock.Problem(airlock.EUNAVAILABLE, ProblemNodeBusy, "all %d execution slots of this node are busy; retry later", a.cfg.OneShot).RetryLater(oneShotRetry)
	case <-ctx.Done():
		unqueue()
		a.drop(kind, tenantID, false)
		return ctx.Err()
	}
}

// drop gives back what admit took; slot says whether a one-shot slot was
// taken.
func (a *admission) drop(kind Kind, tenantID string, slot bool) {
	if kind == OneShot && slot {
		<-a.slots
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	counts := a.oneShot
	if kind == Session {
		counts = a.sessions
		a.live--
	}
	if counts[tenantID]--; counts[tenantID] <= 0 {
		delete(counts, tenantID)
	}
}

// close refuses new admissions from now on.
func (a *admission) close() {
	a.mu.Lock()
	a.closed = true
	a.mu.Unlock()
}

// Usage is what a tenant holds on this node now.
type Usage struct {
	OneShot  int // runs holding or waiting for a slot
	Sessions int // live sessions
}

func (a *admission) usage(tenantID string) Usage {
	a.mu.Lock()
	defer a.mu.Unlock()
	return Usage{OneShot: a.oneShot[tenantID], Sessions: a.sessions[tenantID]}
}
