package session

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/tracing"
	"github.com/airlockhq/airlock/service/provision"
)

// idempotencyPoll is how often a retry checks on the request that holds
// its idempotency key.
const idempotencyPoll = 50 * time.Millisecond

// requestHash identifies a create request's body for idempotent retries:
// the hash of its canonical JSON, so white space and member order do not
// matter, but every value does.
func requestHash(req airlock.CreateSessionRequest) string {
	b, _ := json.Marshal(req)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// limitsFor checks a request's timeouts and returns the session's limits.
func (m *Manager) limitsFor(req airlock.CreateSessionRequest) (airlock.SessionLimits, airlock.SessionSize, error) {
	size := req.Size
	if size == "" {
		size = m.cfg.DefaultSize
	}
	z := m.cfg.Sizes[size]
	maxS := int(m.cfg.MaxLifetime / time.Second)
	timeout := int(m.cfg.DefaultTimeout / time.Second)
	if req.TimeoutS > 0 {
		timeout = req.TimeoutS
	}
	if timeout > maxS {
		return airlock.SessionLimits{}, "", airlock.Problem(airlock.EINVALID, "timeout-out-of-range", "timeout_s must be between 1 and %d (0 or absent means %d)", maxS, int(m.cfg.DefaultTimeout/time.Second))
	}
	idle := int(m.cfg.IdleTimeout / time.Second)
	if req.IdleTimeoutS > 0 {
		idle = req.IdleTimeoutS
	}
	if idle > maxS {
		return airlock.SessionLimits{}, "", airlock.Problem(airlock.EINVALID, "timeout-out-of-range", "idle_timeout_s must be between 1 and %d", maxS)
	}
	return airlock.SessionLimits{
		CPUs:               z.CPUs,
		MemoryBytes:        z.MemoryBytes,
		ProcessMemoryBytes: int64(float64(z.MemoryBytes) * m.cfg.ProcessMemory),
		DiskBytes:          z.DiskBytes,
		Pids:               z.Pids,
		OutputBytes:        m.cfg.OutputBytes,
		TimeoutS:           timeout,
		IdleTimeoutS:       idle,
		MaxLifetimeS:       maxS,
	}, size, nil
}

// CreateSession makes a session for the tenant and returns it once its
// sandbox is ready. With an idempotency key, a retry of the same request
// gets the session the first one made (created false), waiting for it if
// it is still being made; the same key with another body is a 422.
func (m *Manager) CreateSession(ctx context.Context, tenant *airlock.Tenant, req airlock.CreateSessionRequest, key string) (*airlock.Session, bool, error) {
	return m.create(ctx, tenant, req, key, createOpts{})
}

func (m *Manager) create(ctx context.Context, tenant *airlock.Tenant, req airlock.CreateSessionRequest, key string, opts createOpts) (*airlock.Session, bool, error) {
	if err := req.Validate(tenant); err != nil {
		return nil, false, err
	}
	if err := m.templateMemory(ctx, tenant, &req); err != nil {
		return nil, false, err
	}
	if err := m.fromSnapshot(ctx, tenant, &req, &opts); err != nil {
		return nil, false, err
	}
	if opts.cleanup != nil {
		defer opts.cleanup()
	}
	n, err := m.plan(ctx, tenant, req, key, opts.image)
	if err != nil {
		return nil, false, err
	}
	if key != "" {
		s, err := m.claim(ctx, tenant, key, n.hash, n.id)
		if err != nil || s != nil {
			return s, false, err
		}
	}
	ticket, err := m.admit(ctx, n, opts)
	if err != nil {
		m.releaseKey(ctx, n)
		return nil, false, err
	}
	if err := m.attachVolumes(ctx, n, ticket); err != nil {
		ticket.Cancel()
		m.releaseKey(ctx, n)
		return nil, false, err
	}
	l, err := m.record(ctx, n, ticket)
	if err != nil {
		m.detachVolumes(ctx, n.id)
		return nil, false, err
	}
	// The sandbox is made even if the client goes away meanwhile: a retry
	// with the same key then finds the session ready.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), m.cfg.CreateTimeout)
	defer cancel()
	lease, err := m.makeSandbox(cctx, n, ticket, opts)
	if err != nil {
		m.cfg.Logger.Error("create session sandbox", "session", n.id, "err", err)
		m.createFailed(ctx, l, err)
		m.releaseKey(ctx, n)
		return nil, false, sandboxFailed(n.id, err)
	}
	return m.serve(ctx, cctx, l, lease, opts), true, nil
}

// newSession is what create decides before it takes anything: the
// session's ID, size and limits, network, image, and the hash of the
// request its idempotency key stands for.
type newSession struct {
	id, key, hash string
	tenant        *airlock.Tenant
	req           airlock.CreateSessionRequest
	limits        airlock.SessionLimits
	size          airlock.SessionSize
	net           airlock.NetworkPolicy
	img           *airlock.Image
	lifecycle     airlock.SessionLifecycle
	volumes       []airlock.SandboxVolume // what Attach gave the session
}

// plan checks the idempotency key, works out the session's limits,
// network and image, and picks its ID. recorded, when set, is the image
// name a saved sandbox was recorded with (createOpts.image).
func (m *Manager) plan(ctx context.Context, tenant *airlock.Tenant, req airlock.CreateSessionRequest, key, recorded string) (*newSession, error) {
	if key != "" && !airlock.ValidIdempotencyKey(key) {
		return nil, airlock.Problem(airlock.EINVALID, "invalid-idempotency-key", "Idempotency-Key must be 1 to %d printable ASCII characters without spaces", airlock.MaxIdempotencyKeyBytes)
	}
	limits, size, err := m.limitsFor(req)
	if err != nil {
		return nil, err
	}
	netPolicy := airlock.NetworkPolicy{Mode: airlock.NetworkNone}
	if req.Network != nil {
		netPolicy = *req.Network
	}
	lc, err := m.lifecycleFor(req, netPolicy)
	if err != nil {
		return nil, err
	}
	var img *airlock.Image
	if recorded != "" {
		img, err = m.cfg.Images.Resolve(ctx, recorded)
	} else {
		img, err = airlock.ResolveRequestImage(ctx, m.cfg.Images, m.cfg.Templates, tenant.ID, req.Image, req.Template, m.cfg.DefaultImage)
	}
	if err != nil {
		return nil, err
	}
	return &newSession{
		id: m.cfg.NewID(), key: key, hash: requestHash(req), tenant: tenant, req: req,
		limits: limits, size: size, net: netPolicy, img: img, lifecycle: lc,
	}, nil
}

// releaseKey gives back the idempotency key create claimed, when the
// session is not made.
func (m *Manager) releaseKey(ctx context.Context, n *newSession) {
	if n.key == "" {
		return
	}
	if err := m.cfg.Sessions.ReleaseIdempotencyKey(context.WithoutCancel(ctx), n.tenant.ID, n.key, n.id); err != nil {
		m.cfg.Logger.Error("release idempotency key", "session", n.id, "err", err)
	}
}

// admit takes the session's admission and backend, within the tenant's
// isolation floor, as for every sandbox of the node; a node shutting down
// refuses.
func (m *Manager) admit(ctx context.Context, n *newSession, opts createOpts) (*provision.Ticket, error) {
	m.mu.Lock()
	closed := m.closed
	m.mu.Unlock()
	if closed {
		return nil, shuttingDown()
	}
	// The deadline is the session's expiry as recorded later, near
	// enough for the quotas' Retry-After.
	claim := provision.Claim{
		Kind: provision.Session, Tenant: n.tenant, Isolation: n.req.Isolation,
		Network: n.net.HasNetwork(), BrokerScopes: n.req.BrokerScopes,
		Limits:   airlock.Limits{CPUs: n.limits.CPUs, MemoryBytes: n.limits.MemoryBytes},
		Deadline: m.cfg.Now().Add(time.Duration(n.limits.TimeoutS) * time.Second),
	}
	// One node: this one; a fleet places before it forwards.
	tracing.Place(ctx, tracing.LocalNode)
	if opts.resumeDir != "" { // a fork with process state: the parent's backend
		return m.cfg.Provisioner.AdmitOn(ctx, claim, opts.backend)
	}
	return m.cfg.Provisioner.Admit(ctx, claim)
}

// record lists the session as live and records it, creating; on error
// the admission and the idempotency key are given back and nothing is
// left.
func (m *Manager) record(ctx context.Context, n *newSession, ticket *provision.Ticket) (*live, error) {
	now := m.cfg.Now().UTC()
	l := newLive(airlock.Session{
		ID:             n.id,
		TenantID:       n.tenant.ID,
		Image:          n.img.Name,
		Size:           n.size,
		State:          airlock.SessionCreating,
		Limits:         n.limits,
		Network:        n.net,
		BrokerScopes:   n.req.BrokerScopes,
		Backend:        ticket.Backend().Name(),
		IdempotencyKey: n.key,
		RequestHash:    n.hash,
		CreatedAt:      now,
		ExpiresAt:      now.Add(time.Duration(n.limits.TimeoutS) * time.Second),
		LastActiveAt:   now,
		Lifecycle:      n.lifecycle,
		Volumes:        n.req.Volumes,
	})
	m.mu.Lock()
	m.live[n.id] = l
	m.mu.Unlock()
	rec := l.rec
	if err := m.cfg.Sessions.CreateSession(ctx, &rec); err != nil {
		ticket.Cancel()
		m.forget(l)
		m.releaseKey(ctx, n)
		close(l.ended)
		return nil, err
	}
	return l, nil
}

// makeSandbox takes the session's sandbox from the ticket: a fresh one,
// or the paused sandbox of a fork resumed, then seeded when the fork
// asks; a sandbox that cannot be seeded is destroyed.
func (m *Manager) makeSandbox(ctx context.Context, n *newSession, ticket *provision.Ticket, opts createOpts) (*provision.Lease, error) {
	spec := provision.Spec{
		ID:    "ss-" + n.id,
		Image: n.img,
		Limits: airlock.Limits{
			CPUs:        n.limits.CPUs,
			MemoryBytes: n.limits.MemoryBytes,
			DiskBytes:   n.limits.DiskBytes,
			Pids:        n.limits.Pids,
			OutputBytes: n.limits.OutputBytes,
		},
		Labels:             map[string]string{"airlock.session": n.id, "airlock.tenant": n.tenant.ID},
		ContextMemoryBytes: n.limits.ProcessMemoryBytes,
		Volumes:            n.volumes,
	}
	if n.net.HasNetwork() || len(n.req.BrokerScopes) > 0 {
		spec.Network = &airlock.NetworkRequest{TenantID: n.tenant.ID, SessionID: n.id, Policy: n.net, BrokerScopes: n.req.BrokerScopes}
	}
	var lease *provision.Lease
	var err error
	if opts.resumeDir != "" {
		spec.ID = restoredID(n.id)
		lease, err = ticket.Resume(ctx, spec, opts.resumeDir)
	} else {
		lease, err = ticket.Acquire(ctx, spec)
	}
	if err == nil && opts.seed != nil {
		if err = opts.seed(ctx, lease); err != nil {
			lease.Destroy(ctx)
		}
	}
	return lease, err
}

// createFailed records the session as failed with the reason its
// sandbox could not be made.
func (m *Manager) createFailed(ctx context.Context, l *live, err error) {
	l.mu.Lock()
	l.rec.EndReason, l.rec.EndDetail = airlock.EndCreateFailed, "the sandbox could not be made"
	if ae := (*airlock.Error)(nil); errors.As(err, &ae) && ae.Message != "" {
		l.rec.EndDetail = ae.Message
	}
	l.mu.Unlock()
	m.finish(ctx, l, nil, airlock.SessionFailed)
}

// sandboxFailed is the error of a create whose sandbox could not be
// made: the domain error it was, or a 503 sandbox-failed.
func sandboxFailed(id string, err error) error {
	var ae *airlock.Error
	if errors.As(err, &ae) {
		return err
	}
	return &airlock.Error{Code: airlock.EUNAVAILABLE, Type: "sandbox-failed", Message: "the session's sandbox could not be made; the session is recorded as failed (session " + id + ")", Err: err}
}

// serve hands the sandbox to the session and makes it ready (or ends it,
// when it was deleted while it was made), and watches it from then on.
func (m *Manager) serve(ctx, cctx context.Context, l *live, lease *provision.Lease, opts createOpts) *airlock.Session {
	l.mu.Lock()
	l.lease = lease
	l.rec.StartSource = lease.StartSource()
	l.rec.SandboxID = lease.Sandbox().ID()
	if l.rec.State == airlock.SessionDestroying { // deleted while it was made
		l.mu.Unlock()
		m.finish(ctx, l, lease, airlock.SessionDestroyed)
		return m.snapshot(ctx, l)
	}
	l.rec.LastActiveAt = m.cfg.Now().UTC()
	m.move(ctx, l, airlock.SessionReady)
	l.mu.Unlock()
	if opts.resumeDir != "" {
		m.restored(cctx, l, true)
	}
	go m.watch(l)
	return m.snapshot(ctx, l)
}

// claim takes the idempotency key for session id. It returns nil, nil
// when the key is ours (go on creating), or the session an earlier
// request with the key made, waiting while that one is still being made.
func (m *Manager) claim(ctx context.Context, tenant *airlock.Tenant, key, hash, id string) (*airlock.Session, error) {
	deadline := time.Now().Add(m.cfg.CreateTimeout + 10*time.Second)
	for {
		now := m.cfg.Now().UTC()
		held, ok, err := m.cfg.Sessions.ClaimIdempotencyKey(ctx, &airlock.IdempotencyKey{
			TenantID: tenant.ID, Key: key, RequestHash: hash, SessionID: id,
			CreatedAt: now, ExpiresAt: now.Add(m.cfg.IdempotencyTTL),
		})
		if err != nil {
			return nil, err
		}
		if ok {
			return nil, nil
		}
		if held.RequestHash != hash {
			return nil, airlock.Problem(airlock.EUNPROCESSABLE, "idempotency-key-reused",
				"Idempotency-Key %q was used within the last %s for a different request body", key, m.cfg.IdempotencyTTL)
		}
		s, err := m.Session(ctx, tenant, held.SessionID)
		switch {
		case err == nil && s.State != airlock.SessionCreating:
			return s, nil
		case err != nil && airlock.ErrorCode(err) != airlock.ENOTFOUND:
			return nil, err
		}
		// The first request is still making the session (or has not
		// recorded it yet): wait for it, or for its key to be freed.
		if time.Now().After(deadline) {
			return nil, airlock.Problem(airlock.EUNAVAILABLE, "idempotency-key-busy", "the request that holds Idempotency-Key %q has not finished; retry later", key)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(idempotencyPoll):
		}
	}
}

// Session returns one of the tenant's sessions, live or ended.
func (m *Manager) Session(ctx context.Context, tenant *airlock.Tenant, id string) (*airlock.Session, error) {
	m.mu.Lock()
	l := m.live[id]
	m.mu.Unlock()
	if l != nil {
		s := m.snapshot(ctx, l)
		if s.TenantID != tenant.ID {
			return nil, notFound(id)
		}
		return s, nil
	}
	s, err := m.cfg.Sessions.Session(ctx, tenant.ID, id)
	if airlock.ErrorCode(err) == airlock.ENOTFOUND {
		return nil, notFound(id)
	}
	if err == nil {
		m.pausedAt(ctx, s)
		m.endFacts(ctx, s)
	}
	return s, err
}

// ListSessions returns a page of the tenant's sessions, newest first.
func (m *Manager) ListSessions(ctx context.Context, tenant *airlock.Tenant, f airlock.SessionFilter) (*airlock.SessionPage, error) {
	f.TenantID = tenant.ID
	limit := f.Limit
	if limit <= 0 {
		limit = 50
	}
	f.Limit = limit
	list, err := m.cfg.Sessions.ListSessions(ctx, f)
	if err != nil {
		return nil, err
	}
	page := &airlock.SessionPage{Sessions: make([]*airlock.Session, 0, len(list))}
	for _, s := range list {
		m.mu.Lock()
		l := m.live[s.ID]
		m.mu.Unlock()
		if l != nil {
			s = m.snapshot(ctx, l)
		} else {
			m.pausedAt(ctx, s)
		}
		page.Sessions = append(page.Sessions, s)
	}
	if len(list) == limit {
		page.NextCursor = list[len(list)-1].ID
	}
	return page, nil
}

// DeleteSession destroys the tenant's session and returns its final
// record. Deleting a session that has already ended returns its record.
func (m *Manager) DeleteSession(ctx context.Context, tenant *airlock.Tenant, id string) (*airlock.Session, error) {
	m.mu.Lock()
	l := m.live[id]
	m.mu.Unlock()
	if l == nil {
		if s, ok, err := m.deletePaused(ctx, tenant, id); ok {
			return s, err
		}
		return m.Session(ctx, tenant, id)
	}
	l.mu.Lock()
	owner, pausing := l.rec.TenantID, l.pausing
	l.mu.Unlock()
	if owner != tenant.ID {
		return nil, notFound(id)
	}
	if pausing {
		return nil, airlock.Problem(airlock.ECONFLICT, "session-pausing", "session %s is being paused or forked; delete it in a moment", id)
	}
	if err := m.destroy(ctx, l, airlock.SessionDestroyed, airlock.EndDeleted, "deleted through the API"); err != nil {
		m.cfg.Logger.Error("delete session", "session", id, "err", err)
	}
	return m.Session(ctx, tenant, id)
}

// ExtendSession sets the session to expire timeoutS seconds from now. The
// new expiry must be within the maximum lifetime, counted from creation.
func (m *Manager) ExtendSession(ctx context.Context, tenant *airlock.Tenant, id string, timeoutS int) (*airlock.Session, error) {
	l, err := m.lookup(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	now := m.cfg.Now().UTC()
	l.mu.Lock()
	if !l.rec.State.Live() || l.rec.State == airlock.SessionCreating {
		rec := l.rec
		l.mu.Unlock()
		if rec.State == airlock.SessionCreating {
			return nil, airlock.Problem(airlock.ECONFLICT, "session-not-ready", "session %s is still being created", id)
		}
		return nil, ended(&rec)
	}
	limit := l.rec.CreatedAt.Add(time.Duration(l.rec.Limits.MaxLifetimeS) * time.Second)
	left := int(limit.Sub(now) / time.Second)
	if timeoutS < 1 || timeoutS > left {
		l.mu.Unlock()
		return nil, airlock.Problem(airlock.EINVALID, "timeout-out-of-range",
			"timeout_s must be between 1 and %d: a session may live %ds from its creation (until %s)",
			max(left, 1), l.rec.Limits.MaxLifetimeS, limit.Format(time.RFC3339))
	}
	l.rec.ExpiresAt = now.Add(time.Duration(timeoutS) * time.Second)
	l.rec.Limits.TimeoutS = int(l.rec.ExpiresAt.Sub(l.rec.CreatedAt) / time.Second)
	m.persist(ctx, l)
	l.mu.Unlock()
	return m.snapshot(ctx, l), nil
}

// Warm readies sessions of an image and size ahead of requests: the
// provisioner keeps a base snapshot and pool members of their sandbox.
func (m *Manager) Warm(ctx context.Context, image string, size airlock.SessionSize) error {
	img, err := m.cfg.Images.Resolve(ctx, image)
	if err != nil {
		return err
	}
	z := m.cfg.Sizes[size]
	m.cfg.Provisioner.WarmSessions(img, airlock.Limits{CPUs: z.CPUs, MemoryBytes: z.MemoryBytes, DiskBytes: z.DiskBytes, Pids: z.Pids, OutputBytes: m.cfg.OutputBytes},
		int64(float64(z.MemoryBytes)*m.cfg.ProcessMemory))
	return nil
}
