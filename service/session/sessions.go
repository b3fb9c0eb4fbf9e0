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
	if err := m.fromSnapshot(ctx, tenant, &req, &opts); err != nil {
		return nil, false, err
	}
	if opts.cleanup != nil {
		defer opts.cleanup()
	}
	if key != "" && !airlock.ValidIdempotencyKey(key) {
		return nil, false, airlock.Problem(airlock.EINVALID, "invalid-idempotency-key", "Idempotency-Key must be 1 to %d printable ASCII characters without spaces", airlock.MaxIdempotencyKeyBytes)
	}
	limits, size, err := m.limitsFor(req)
	if err != nil {
		return nil, false, err
	}
	netPolicy := airlock.NetworkPolicy{Mode: airlock.NetworkNone}
	if req.Network != nil {
		netPolicy = *req.Network
	}
	needNetwork := netPolicy.HasNetwork() || len(req.BrokerScopes) > 0
	imageName := req.Image
	if imageName == "" {
		imageName = m.cfg.DefaultImage
	}
	img, err := m.cfg.Images.Resolve(ctx, imageName)
	if err != nil {
		return nil, false, err
	}
	hash := requestHash(req)
	id := m.cfg.NewID()
	if key != "" {
		s, err := m.claim(ctx, tenant, key, hash, id)
		if err != nil || s != nil {
			return s, false, err
		}
	}
	release := func() {
		if key != "" {
			if err := m.cfg.Sessions.ReleaseIdempotencyKey(context.WithoutCancel(ctx), tenant.ID, key, id); err != nil {
				m.cfg.Logger.Error("release idempotency key", "session", id, "err", err)
			}
		}
	}
	m.mu.Lock()
	closed := m.closed
	m.mu.Unlock()
	if closed {
		release()
		return nil, false, shuttingDown()
	}
	// Admission and the backend, within the tenant's isolation floor, as
	// for every sandbox of the node.
	// The session's expiry as recorded below, near enough for the
	// quotas' Retry-After.
	claim := provision.Claim{
		Kind: provision.Session, Tenant: tenant, Isolation: req.Isolation,
		Network: netPolicy.HasNetwork(), BrokerScopes: req.BrokerScopes,
		Limits:   airlock.Limits{CPUs: limits.CPUs, MemoryBytes: limits.MemoryBytes},
		Deadline: m.cfg.Now().Add(time.Duration(limits.TimeoutS) * time.Second),
	}
	var ticket *provision.Ticket
	// One node: this one; a fleet places before it forwards.
	tracing.Place(ctx, tracing.LocalNode)
	if opts.resumeDir != "" { // a fork with process state: the parent's backend
		ticket, err = m.cfg.Provisioner.AdmitOn(ctx, claim, opts.backend)
	} else {
		ticket, err = m.cfg.Provisioner.Admit(ctx, claim)
	}
	if err != nil {
		release()
		return nil, false, err
	}

	now := m.cfg.Now().UTC()
	l := newLive(airlock.Session{
		ID:             id,
		TenantID:       tenant.ID,
		Image:          img.Name,
		Size:           size,
		State:          airlock.SessionCreating,
		Limits:         limits,
		Network:        netPolicy,
		BrokerScopes:   req.BrokerScopes,
		Backend:        ticket.Backend().Name(),
		IdempotencyKey: key,
		RequestHash:    hash,
		CreatedAt:      now,
		ExpiresAt:      now.Add(time.Duration(limits.TimeoutS) * time.Second),
		LastActiveAt:   now,
	})
	m.mu.Lock()
	m.live[id] = l
	m.mu.Unlock()

	rec := l.rec
	if err := m.cfg.Sessions.CreateSession(ctx, &rec); err != nil {
		ticket.Cancel()
		m.forget(l)
		release()
		close(l.ended)
		return nil, false, err
	}

	// The sandbox is made even if the client goes away meanwhile: a retry
	// with the same key then finds the session ready.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), m.cfg.CreateTimeout)
	defer cancel()
	spec := provision.Spec{
		ID:    "ss-" + id,
		Image: img,
		Limits: airlock.Limits{
			CPUs:        limits.CPUs,
			MemoryBytes: limits.MemoryBytes,
			DiskBytes:   limits.DiskBytes,
			Pids:        limits.Pids,
			OutputBytes: limits.OutputBytes,
		},
		Labels: map[string]string{"airlock.session": id, "airlock.tenant": tenant.ID},
	}
	if needNetwork {
		spec.Network = &airlock.NetworkRequest{TenantID: tenant.ID, SessionID: id, Policy: netPolicy, BrokerScopes: req.BrokerScopes}
	}
	var lease *provision.Lease
	if opts.resumeDir != "" {
		spec.ID = restoredID(id)
		lease, err = ticket.Resume(cctx, spec, opts.resumeDir)
	} else {
		lease, err = ticket.Acquire(cctx, spec)
	}
	if err == nil && opts.seed != nil {
		if err = opts.seed(cctx, lease); err != nil {
			lease.Destroy(cctx)
		}
	}
	if err != nil {
		m.cfg.Logger.Error("create session sandbox", "session", id, "err", err)
		l.mu.Lock()
		l.rec.EndReason, l.rec.EndDetail = airlock.EndCreateFailed, "the sandbox could not be made"
		if ae := (*airlock.Error)(nil); errors.As(err, &ae) && ae.Message != "" {
			l.rec.EndDetail = ae.Message
		}
		l.mu.Unlock()
		m.finish(ctx, l, nil, airlock.SessionFailed)
		release()
		var ae *airlock.Error
		if errors.As(err, &ae) {
			return nil, false, err
		}
		return nil, false, &airlock.Error{Code: airlock.EUNAVAILABLE, Type: "sandbox-failed", Message: "the session's sandbox could not be made; the session is recorded as failed (session " + id + ")", Err: err}
	}
	l.mu.Lock()
	l.lease = lease
	l.rec.StartSource = lease.StartSource()
	l.rec.SandboxID = lease.Sandbox().ID()
	if l.rec.State == airlock.SessionDestroying { // deleted while it was made
		l.mu.Unlock()
		m.finish(ctx, l, lease, airlock.SessionDestroyed)
		s := m.snapshot(ctx, l)
		return s, true, nil
	}
	l.rec.LastActiveAt = m.cfg.Now().UTC()
	m.move(ctx, l, airlock.SessionReady)
	l.mu.Unlock()
	if opts.resumeDir != "" {
		m.restored(cctx, l, true)
	}
	go m.watch(l)
	return m.snapshot(ctx, l), true, nil
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
	m.cfg.Provisioner.Warm(img, "", airlock.Limits{CPUs: z.CPUs, MemoryBytes: z.MemoryBytes, DiskBytes: z.DiskBytes, Pids: z.Pids, OutputBytes: m.cfg.OutputBytes})
	return nil
}
