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
	ProblemSessionQuota = "session-quota" // the sessions quota (package quota)
	ProblemShuttingDown = "shutting-down"
)

// Retry-After hints: a one-shot slot frees within seconds, a session
// only when one ends.
const (
	oneShotRetry = 2 * time.Second
	sessionRetry = 30 * time.Second
)

// admission counts what holds or waits for room, per node and per tenant.
//
// A one-shot run needs two things: one of its tenant's slots (at most the
// tenant's share of the node's) and one of the node's slots. A run that
// finds either taken waits in the queue (at most MaxQueue runs of all
// tenants, and a tenant's share of those); past the queue the answer is a
// 503 node-busy problem, past the tenant's share of it a 429 tenant-busy,
// both with Retry-After. So one tenant can neither hold every slot nor
// fill the queue, and a tenant that stays within its share waits only
// for the node.
type admission struct {
	cfg   Admission
	slots chan struct{} // one-shot slots of the node

	mu       sync.Mutex
	tenants  map[string]*tenantSlots // one-shot, by tenant
	sessions map[string]int          // by tenant: live
	live     int                     // sessions on the node
	queued   int                     // one-shot runs waiting
	closed   bool
}

// tenantSlots is one tenant's one-shot runs: a semaphore of its share of
// the slots, and how many hold or wait.
type tenantSlots struct {
	slots   chan struct{}
	holding int
	waiting int
}

func newAdmission(cfg Admission) *admission {
	return &admission{
		cfg:      cfg,
		slots:    make(chan struct{}, cfg.OneShot),
		tenants:  map[string]*tenantSlots{},
		sessions: map[string]int{},
	}
}

// tenantQueue is how many runs one tenant may have waiting.
func (a *admission) tenantQueue() int {
	return max(int(float64(a.cfg.MaxQueue)*a.cfg.OneShotTenantShare+0.999999), 1)
}

// admit takes room for one sandbox of kind for the tenant. A one-shot run
// waits up to QueueTimeout for a slot; everything else answers at once.
// force admits a session whatever the limits say (one that existed
// before a restart is counted, never refused); it is not for one-shot
// runs.
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
		case a.live >= a.cfg.Sessions:
			return airlock.Problem(airlock.EUNAVAILABLE, ProblemNodeBusy, "this node runs its maximum of %d sessions; retry later", a.cfg.Sessions).RetryLater(sessionRetry)
		}
		a.live++
		a.sessions[tenantID]++
		return nil
	}
	t := a.tenants[tenantID]
	if t == nil {
		t = &tenantSlots{slots: make(chan struct{}, a.cfg.tenantSlots())}
		a.tenants[tenantID] = t
	}
	// Both free: no queue.
	select {
	case t.slots <- struct{}{}:
		select {
		case a.slots <- struct{}{}:
			t.holding++
			a.mu.Unlock()
			return nil
		default:
			<-t.slots
		}
	default:
	}
	switch {
	case t.waiting >= a.tenantQueue():
		holding, waiting := t.holding, t.waiting
		a.mu.Unlock()
		return airlock.Problem(airlock.ERATELIMITED, ProblemTenantBusy,
			"the tenant runs %d one-shot executions, its share of this node's %d slots, and %d more wait; retry when one has finished",
			holding, a.cfg.OneShot, waiting).RetryLater(oneShotRetry)
	case a.queued >= a.cfg.MaxQueue:
		a.mu.Unlock()
		return airlock.Problem(airlock.EUNAVAILABLE, ProblemNodeBusy,
			"all %d execution slots of this node are busy and %d requests wait already; retry later", a.cfg.OneShot, a.cfg.MaxQueue).RetryLater(oneShotRetry)
	}
	t.waiting++
	a.queued++
	a.mu.Unlock()
	timer := time.NewTimer(a.cfg.QueueTimeout)
	defer timer.Stop()
	gotTenant, gotNode := false, false
	var err error
	select {
	case t.slots <- struct{}{}:
		gotTenant = true
	case <-timer.C:
	case <-ctx.Done():
		err = ctx.Err()
	}
	if gotTenant {
		select {
		case a.slots <- struct{}{}:
			gotNode = true
		case <-timer.C:
		case <-ctx.Done():
			err = ctx.Err()
		}
	}
	a.mu.Lock()
	t.waiting--
	a.queued--
	if gotNode {
		t.holding++
		a.mu.Unlock()
		return nil
	}
	if gotTenant {
		<-t.slots
	}
	a.forgetIdle(tenantID, t)
	a.mu.Unlock()
	if err != nil {
		return err
	}
	if !gotTenant {
		return airlock.Problem(airlock.ERATELIMITED, ProblemTenantBusy,
			"the tenant's share of this node's %d execution slots stayed busy for %s; retry when one has finished", a.cfg.OneShot, a.cfg.QueueTimeout).RetryLater(oneShotRetry)
	}
	return airlock.Problem(airlock.EUNAVAILABLE, ProblemNodeBusy, "all %d execution slots of this node stayed busy for %s; retry later", a.cfg.OneShot, a.cfg.QueueTimeout).RetryLater(oneShotRetry)
}

// forgetIdle drops the record of a tenant with nothing holding or
// waiting (a.mu held).
func (a *admission) forgetIdle(tenantID string, t *tenantSlots) {
	if t.holding == 0 && t.waiting == 0 && a.tenants[tenantID] == t {
		delete(a.tenants, tenantID)
	}
}

// drop gives back what admit took; slot says whether a one-shot run's
// slots were taken.
func (a *admission) drop(kind Kind, tenantID string, slot bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if kind == Session {
		a.live--
		if a.sessions[tenantID]--; a.sessions[tenantID] <= 0 {
			delete(a.sessions, tenantID)
		}
		return
	}
	t := a.tenants[tenantID]
	if t == nil || !slot {
		return
	}
	<-a.slots
	<-t.slots
	t.holding--
	a.forgetIdle(tenantID, t)
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
	u := Usage{Sessions: a.sessions[tenantID]}
	if t := a.tenants[tenantID]; t != nil {
		u.OneShot = t.holding + t.waiting
	}
	return u
}
