package provision

import (
	"context"
	"time"

	"github.com/airlockhq/airlock"
)

// Pause saves the leased sandbox into dir on this node with its backend's
// Pauser and ends the lease: the sandbox is gone and the node's room (and
// the tenant's) is given back. If saving fails the lease still holds the
// sandbox (Destroy it, or go on using it when it still runs).
func (l *Lease) Pause(ctx context.Context, dir string) error {
	b := l.p.backend(l.backend)
	pz, ok := b.(airlock.Pauser)
	if !ok {
		return airlock.Problem(airlock.ECONFLICT, "pause-unsupported", "the %s backend cannot pause a sandbox", l.backend)
	}
	if err := pz.Pause(ctx, l.sb, dir); err != nil {
		return err
	}
	l.once.Do(func() { l.ticket.Cancel() })
	return nil
}

// AdmitOn is Admit for a sandbox that must run on the named backend (a
// paused session resumes where it was saved): the tenant's isolation
// floor, quarantine, the network check, the quotas and admission apply
// as for any claim (the same code as Admit).
func (p *Provisioner) AdmitOn(ctx context.Context, c Claim, backend string) (*Ticket, error) {
	b := p.backend(backend)
	if b == nil {
		return nil, airlock.Problem(airlock.EUNAVAILABLE, "backend-unavailable", "backend %q is not configured on this node", backend)
	}
	return p.admitAmong(ctx, c, []airlock.Backend{b})
}

// Resume turns an admitted ticket into a lease on a sandbox resumed from a
// directory its backend's Pause made. On error the ticket is given back;
// dir is left as it was.
func (t *Ticket) Resume(ctx context.Context, s Spec, dir string) (*Lease, error) {
	pz, ok := t.backend.(airlock.Pauser)
	if !ok {
		t.Cancel()
		return nil, airlock.Problem(airlock.ECONFLICT, "pause-unsupported", "the %s backend cannot resume a sandbox", t.backend.Name())
	}
	start := time.Now()
	sb, err := pz.Resume(ctx, airlock.SandboxSpec{ID: s.ID, Image: s.Image, Limits: s.Limits, Labels: s.Labels}, dir)
	if err != nil {
		t.Cancel()
		return nil, err
	}
	t.hold.Start() // its sandbox-seconds count from now: paused time does not
	l := &Lease{p: t.p, ticket: t, sb: sb, backend: t.backend.Name(), source: airlock.StartRestore, acquire: time.Since(start)}
	t.p.metrics.acquire.WithLabelValues(t.kind.String(), airlock.StartRestore).Observe(l.acquire.Seconds())
	return l, nil
}
