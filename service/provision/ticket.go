package provision

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/tracing"
	"github.com/airlockhq/airlock/service/quota"
)

// Claim is what a caller asks of the node before anything is made for
// it.
type Claim struct {
	Kind   Kind
	Tenant *airlock.Tenant
	// Isolation is the level asked for; "" means the node's default
	// backend. The tenant's floor applies either way.
	Isolation airlock.Isolation
	// Network says the sandbox needs a network; BrokerScopes are the
	// credential broker scopes it will call (they need one too).
	Network      bool
	BrokerScopes []string
	// Limits are the sandbox's limits: its vCPU and memory count against
	// the tenant's quotas while it lives.
	Limits airlock.Limits
	// Deadline is when the sandbox ends at the latest (a run's timeout, a
	// session's expiry); zero if unknown. It shapes Retry-After.
	Deadline time.Time
	// Continues says the claim is for a session that goes on without a
	// break its user could see (a live session given its sandbox back
	// after saving it): it is counted whatever the quotas and the node's
	// limits say, as a session taken back after a restart is. The
	// isolation floor, the quarantine and the network check still apply.
	// Only for Kind Session.
	Continues bool
}

// Ticket is admitted room for one sandbox on a chosen backend. Acquire
// turns it into a Lease; Cancel gives it back unused.
type Ticket struct {
	p       *Provisioner
	kind    Kind
	tenant  string
	backend airlock.Backend
	hold    *quota.Hold
	once    sync.Once
}

// Backend is the backend chosen for the claim.
func (t *Ticket) Backend() airlock.Backend { return t.backend }

// Cancel gives the room back. It is safe to call more than once, and a
// no-op once the ticket was turned into a lease (the lease gives it back).
func (t *Ticket) Cancel() {
	t.once.Do(func() {
		t.p.admission.drop(t.kind, t.tenant, t.kind == OneShot)
		t.hold.Release()
	})
}

// Admit chooses the backend of a claim within the tenant's isolation
// floor, checks that the node can give it the network it asks for, and
// takes its share of the tenant's quotas and room for it on the node
// and in the tenant's share of the node. Errors are problems for the
// client: isolation-not-allowed (403), isolation-unavailable (503),
// network-unavailable (403), node-busy (503), tenant-busy (429) and the
// quotas' (429, see package quota). Nothing is made yet, and nothing is
// held after an error.
func (p *Provisioner) Admit(ctx context.Context, c Claim) (*Ticket, error) {
	return p.admitAmong(ctx, c, p.cfg.Backends)
}

// admitAmong is Admit with the backend chosen among backends: every
// claim, whatever it is for (a new sandbox, a resume, a fork), passes
// the same checks in the same order.
func (p *Provisioner) admitAmong(ctx context.Context, c Claim, backends []airlock.Backend) (*Ticket, error) {
	if c.Tenant == nil {
		return nil, fmt.Errorf("provision: a claim needs a tenant")
	}
	if err := p.checkQuarantine(ctx, c.Tenant); err != nil {
		return nil, err
	}
	b, err := airlock.ChooseBackend(backends, c.Tenant, c.Isolation)
	if err != nil {
		return nil, err
	}
	if err := p.checkNetwork(ctx, b, c); err != nil {
		return nil, err
	}
	force := c.Continues && c.Kind == Session
	hold, err := p.cfg.Quotas.Admit(c.Tenant.ID, quotaClaim(c, force))
	if err != nil {
		return nil, err
	}
	if err := p.admission.admit(ctx, c.Kind, c.Tenant.ID, force); err != nil {
		hold.Release()
		return nil, err
	}
	return &Ticket{p: p, kind: c.Kind, tenant: c.Tenant.ID, backend: b, hold: hold}, nil
}

// quotaClaim is what a claim takes of its tenant's quotas.
func quotaClaim(c Claim, force bool) quota.Claim {
	q := quota.Claim{
		Kind: quota.Run, CPUs: c.Limits.CPUs, MemoryBytes: c.Limits.MemoryBytes,
		Network: c.Network || len(c.BrokerScopes) > 0, Deadline: c.Deadline, Force: force,
	}
	if c.Kind == Session {
		q.Kind = quota.Session
	}
	return q
}

// AdmitExec counts one exec or cell of a session against its tenant's
// executions per minute, or refuses it with a 429 problem.
func (p *Provisioner) AdmitExec(tenantID string) error { return p.cfg.Quotas.Exec(tenantID) }

// checkNetwork refuses a claim for a network this node cannot give.
func (p *Provisioner) checkNetwork(ctx context.Context, b airlock.Backend, c Claim) error {
	if !c.Network && len(c.BrokerScopes) == 0 {
		return nil
	}
	if p.cfg.Egress == nil {
		if !c.Network {
			return airlock.Problem(airlock.EFORBIDDEN, "broker-unavailable", "this node runs no credential broker")
		}
		return airlock.Problem(airlock.EFORBIDDEN, "network-unavailable", "this node has no egress proxy, so sandboxes here have no network")
	}
	if !slices.Contains(b.Capabilities().NetworkModes, airlock.NetworkAllowList) {
		return airlock.Problem(airlock.EFORBIDDEN, "network-unavailable", "the %s backend cannot give a sandbox a network", b.Name())
	}
	for _, sc := range c.BrokerScopes {
		if !p.cfg.Egress.HasBrokerScope(sc) {
			return airlock.Problem(airlock.EINVALID, "unknown-broker-scope", "the credential broker of this node has no scope %q", sc)
		}
		// Only a tenant granted the scope may name it (the broker checks
		// it again at every call).
		if err := p.cfg.Egress.BrokerGranted(ctx, c.Tenant.ID, sc); err != nil {
			return err
		}
	}
	return nil
}

// Spec says what sandbox to make for an admitted claim.
type Spec struct {
	ID    string // the sandbox's ID: unique, safe as a file name
	Image *airlock.Image
	// Language is the language the sandbox is readied for (its warm
	// runtime, see Recipe); "" for none (a session's sandbox, which runs
	// whatever it is asked to).
	Language airlock.Language
	// Flavour picks a lighter variant of the language's recipe when the
	// image has it (FlavourLight); "" or an unknown one is the recipe
	// itself.
	Flavour string
	Limits  airlock.Limits
	Labels  map[string]string
	// Network, when set, gives the sandbox a network under this request
	// (made by the node's egress and removed with the sandbox). The claim
	// must have asked for one.
	Network *airlock.NetworkRequest
	// ContextMemoryBytes is the address-space limit of the code context
	// a session's sandbox may hold ready (Recipe.Context): the session's
	// ProcessMemoryBytes. It is part of the warm key.
	ContextMemoryBytes int64
	// Volumes are host-mounted volumes to bind into the sandbox: such a
	// sandbox is booted for the spec (pool members and snapshots have
	// none).
	Volumes []airlock.SandboxVolume
}

// Acquire gets the sandbox of an admitted ticket: a ready pool member, a
// restore of the base snapshot, or a cold boot; with a network, a boot
// into a network made for it. On error the ticket is given back and
// nothing of the sandbox is left.
func (t *Ticket) Acquire(ctx context.Context, s Spec) (*Lease, error) {
	start := time.Now()
	ctx, span := tracing.Start(ctx, tracing.SpanAcquire, attribute.String("airlock.backend", t.backend.Name()))
	defer span.End()
	sb, source, err := t.p.sandbox(ctx, t.backend, s)
	if err != nil {
		tracing.Fail(span, err)
		t.Cancel()
		return nil, err
	}
	span.SetAttributes(attribute.String("airlock.start_source", source))
	t.hold.Start()
	l := &Lease{p: t.p, ticket: t, sb: sb, backend: t.backend.Name(), source: source, acquire: time.Since(start)}
	t.p.metrics.acquire.WithLabelValues(t.kind.String(), source).Observe(l.acquire.Seconds())
	return l, nil
}

// sandbox gets a sandbox on backend b.
func (p *Provisioner) sandbox(ctx context.Context, b airlock.Backend, s Spec) (airlock.Sandbox, string, error) {
	if s.Network != nil {
		return p.sandboxWithNetwork(ctx, b, s)
	}
	if len(s.Volumes) > 0 {
		sb, err := b.Create(ctx, airlock.SandboxSpec{ID: s.ID, Image: s.Image, Limits: s.Limits, Labels: s.Labels, Volumes: s.Volumes})
		if err != nil {
			return nil, "", fmt.Errorf("create sandbox on %s: %w", b.Name(), err)
		}
		return sb, airlock.StartCold, nil
	}
	if k, ok := p.keyFor(b, s.Image, s.Language, s.Flavour, s.Limits, s.ContextMemoryBytes); ok {
		return p.sandboxFor(ctx, k, s.ID, s.Labels)
	}
	sb, err := b.Create(ctx, airlock.SandboxSpec{ID: s.ID, Image: s.Image, Limits: s.Limits, Labels: s.Labels})
	if err != nil {
		return nil, "", fmt.Errorf("create sandbox on %s: %w", b.Name(), err)
	}
	if err := startImage(ctx, sb, s.Image); err != nil {
		return nil, "", err
	}
	return sb, airlock.StartCold, nil
}

// sandboxWithNetwork boots a sandbox in a network made for it (pool
// members and snapshots have none), which is removed with the sandbox.
func (p *Provisioner) sandboxWithNetwork(ctx context.Context, b airlock.Backend, s Spec) (airlock.Sandbox, string, error) {
	if p.cfg.Egress == nil {
		return nil, "", airlock.Problem(airlock.EFORBIDDEN, "network-unavailable", "this node has no egress proxy, so sandboxes here have no network")
	}
	att, err := p.cfg.Egress.Attach(ctx, *s.Network)
	if err != nil {
		var ae *airlock.Error
		if errors.As(err, &ae) {
			return nil, "", err
		}
		return nil, "", &airlock.Error{Code: airlock.EUNAVAILABLE, Type: "network-failed", Message: "the sandbox's network could not be made", Err: err}
	}
	labels := map[string]string{}
	for k, v := range s.Labels {
		labels[k] = v
	}
	if n, ok := att.(interface{ Name() string }); ok {
		labels[LabelNetwork] = n.Name()
	}
	sb, err := b.Create(ctx, airlock.SandboxSpec{ID: s.ID, Image: s.Image, Limits: s.Limits, Labels: labels, Network: att.Sandbox(), Volumes: s.Volumes})
	if err != nil {
		return nil, "", errors.Join(fmt.Errorf("create sandbox on %s: %w", b.Name(), err), att.Close(context.WithoutCancel(ctx)))
	}
	if err := startImage(ctx, sb, s.Image); err != nil {
		return nil, "", errors.Join(err, att.Close(context.WithoutCancel(ctx)))
	}
	return airlock.WithNetwork(sb, att), airlock.StartCold, nil
}

// LabelNetwork is the label that names a sandbox's network (its link),
// so that a restarted server can find it again.
const LabelNetwork = "airlock.network"
