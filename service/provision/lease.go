package provision

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/airlockhq/airlock"
)

// Lease is one sandbox held by one one-shot run or one session. It ends
// with exactly one of Release, Destroy or Detach.
type Lease struct {
	p       *Provisioner
	ticket  *Ticket
	sb      airlock.Sandbox
	backend string
	source  string
	acquire time.Duration
	once    sync.Once
	ready   readyContext
}

// Sandbox is the leased sandbox.
func (l *Lease) Sandbox() airlock.Sandbox { return l.sb }

// BackendName names the backend of the sandbox.
func (l *Lease) BackendName() string { return l.backend }

// Accelerator is how the sandbox's guest runs when its backend is a
// microVM's ("kvm" or "tcg"); "" for the other backends.
func (l *Lease) Accelerator() string {
	if l.ticket == nil || l.ticket.backend == nil {
		return ""
	}
	return l.ticket.backend.Capabilities().Accelerator
}

// StartSource says how the sandbox was obtained: airlock.StartPool,
// StartRestore or StartCold.
func (l *Lease) StartSource() string { return l.source }

// AcquireTime is how long Acquire took.
func (l *Lease) AcquireTime() time.Duration { return l.acquire }

// Release gives the node's room back now and destroys the sandbox in the
// background; destroyed, if not nil, is called with the time the destroy
// took once it has succeeded. Its caller need not wait for the rest of a
// sandbox's end once its processes are stopped.
func (l *Lease) Release(destroyed func(time.Duration)) {
	l.once.Do(func() {
		l.ticket.Cancel()
		l.p.destroyLater(l.sb, func(err error, took time.Duration) {
			if err == nil {
				l.p.metrics.destroy.WithLabelValues(l.source).Observe(took.Seconds())
				if destroyed != nil {
					destroyed(took)
				}
			}
		})
	})
}

// Destroy destroys the sandbox and waits for it, then gives the node's
// room back. Calls after the first return nil.
func (l *Lease) Destroy(ctx context.Context) error {
	err := errAlreadyEnded
	l.once.Do(func() {
		defer l.ticket.Cancel()
		start := time.Now()
		err = l.sb.Destroy(ctx)
		if err == nil {
			l.p.metrics.destroy.WithLabelValues(l.source).Observe(time.Since(start).Seconds())
		}
	})
	if err == errAlreadyEnded {
		return nil
	}
	return err
}

var errAlreadyEnded = errors.New("lease already ended")

// Detach leaves the sandbox running for the next server start to
// reattach (a clean stop that keeps sessions): the host's connection to
// its agent is closed and the room given back. A sandbox whose backend
// cannot detach is destroyed instead, and Detach says so in its error.
func (l *Lease) Detach(ctx context.Context) error {
	err := errAlreadyEnded
	l.once.Do(func() {
		defer l.ticket.Cancel()
		err = airlock.ErrCannotDetach
		if d, ok := l.sb.(airlock.Detacher); ok {
			err = d.Detach()
		}
		if errors.Is(err, airlock.ErrCannotDetach) {
			err = errors.Join(err, l.sb.Destroy(ctx))
		}
	})
	if err == errAlreadyEnded {
		return nil
	}
	return err
}

// Reattach finds the sandbox id of a session that an earlier server
// process left running on backend and connects to it again. The session
// is counted against the node and the tenant's quotas whatever the
// limits say (it existed before the restart), with its limits, and its
// time counts from now. source is how the sandbox was first obtained,
// as recorded. network, when the sandbox has one, is the request it was
// made with; its egress is set up again under it.
func (p *Provisioner) Reattach(ctx context.Context, tenant *airlock.Tenant, backend, id, source string, limits airlock.Limits, network *airlock.NetworkRequest) (*Lease, error) {
	b := p.backend(backend)
	if b == nil {
		return nil, airlock.Errorf(airlock.EUNAVAILABLE, "backend %q is not configured on this node", backend)
	}
	r, ok := b.(airlock.Reattacher)
	if !ok {
		return nil, airlock.Errorf(airlock.EUNAVAILABLE, "the %s backend cannot reattach sandboxes", backend)
	}
	start := time.Now()
	sb, err := r.Reattach(ctx, id)
	if err != nil {
		return nil, err
	}
	if network != nil {
		att, err := p.reattachNetwork(ctx, sb, *network)
		if err != nil {
			sb.Destroy(context.WithoutCancel(ctx))
			return nil, err
		}
		sb = airlock.WithNetwork(sb, att)
	}
	hold, err := p.cfg.Quotas.Admit(tenant.ID, quotaClaim(Claim{Kind: Session, Limits: limits, Network: network != nil}, true))
	if err != nil {
		sb.Destroy(context.WithoutCancel(ctx))
		return nil, err
	}
	if err := p.admission.admit(ctx, Session, tenant.ID, true); err != nil {
		hold.Release()
		sb.Destroy(context.WithoutCancel(ctx))
		return nil, err
	}
	hold.Start()
	t := &Ticket{p: p, kind: Session, tenant: tenant.ID, backend: b, hold: hold}
	l := &Lease{p: p, ticket: t, sb: sb, backend: backend, source: source, acquire: time.Since(start)}
	p.metrics.reattach.Observe(l.acquire.Seconds())
	return l, nil
}

// reattachNetwork sets the egress of a reattached sandbox up again.
func (p *Provisioner) reattachNetwork(ctx context.Context, sb airlock.Sandbox, req airlock.NetworkRequest) (airlock.NetworkAttachment, error) {
	re, ok := p.cfg.Egress.(airlock.NetworkReattacher)
	if p.cfg.Egress == nil || !ok {
		return nil, airlock.Errorf(airlock.EUNAVAILABLE, "this node's egress cannot take a network back after a restart")
	}
	lb, ok := sb.(airlock.Labeled)
	name := ""
	if ok {
		name = lb.Labels()[LabelNetwork]
	}
	if name == "" {
		return nil, airlock.Errorf(airlock.EUNAVAILABLE, "the sandbox does not say which network it has")
	}
	return re.ReattachNetwork(ctx, name, req)
}
