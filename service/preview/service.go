package preview

import (
	"context"
	"log/slog"
	"net/http"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/airlockhq/airlock"
)

// Service serves preview URLs. It is safe for concurrent use.
type Service struct {
	cfg   Config
	key   []byte // token key
	rp    http.Handler
	tr    *http.Transport
	audit *auditLog
	log   *slog.Logger

	mu       sync.Mutex
	sessions map[string]*sessionState
}

var _ airlock.PreviewService = (*Service)(nil)

// sessionState is what the service keeps of one session: its ports'
// exposure and tokens, and its use. It lives in memory on the node that
// holds the session and goes with it: tokens and public ports do not
// outlive the session, nor a restart of the node (they fail closed:
// tokens are refused and ports private again).
type sessionState struct {
	tenantID string
	ports    map[int]*portState
	ended    <-chan struct{} // the Ended watched (the live sandbox's)
	unwatch  chan struct{}   // closed when another Ended replaces it
	conns    int             // requests open now
	bytes    int64           // carried both ways over the session's life
}

type portState struct {
	public bool
	tokens map[string]time.Time // ID -> expiry of the tokens issued and not revoked
}

// New returns a service for cfg.
func New(cfg Config) (*Service, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.MaxConns == 0 {
		cfg.MaxConns = DefaultMaxConns
	}
	if cfg.MaxBytes == 0 {
		cfg.MaxBytes = DefaultMaxBytes
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	s := &Service{cfg: cfg, key: deriveKey(cfg.SigningKey), log: cfg.Logger, sessions: map[string]*sessionState{}}
	if cfg.Audit != nil {
		s.audit = newAuditLog(cfg.Audit, cfg.Logger)
	}
	s.tr, s.rp = s.newProxy()
	return s, nil
}

// Close stops the service: idle connections to sandboxes are closed and
// the audit entries queued are written.
func (s *Service) Close() {
	s.tr.CloseIdleConnections()
	if s.audit != nil {
		s.audit.close()
	}
}

// Domain is the preview domain, or "" when Host routing is off.
func (s *Service) Domain() string { return s.cfg.Domain }

// state returns the session's state, made if it is new. It is dropped
// when the session ends; a session that was paused and resumed comes
// back with a new Ended, watched in place of the old (its tokens and
// public ports live on across the pause). s.mu must not be held.
func (s *Service) state(t *airlock.PreviewTarget) *sessionState {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.sessions[t.SessionID]
	if st == nil {
		st = &sessionState{tenantID: t.TenantID, ports: map[int]*portState{}}
		s.sessions[t.SessionID] = st
	}
	if t.Ended != nil && st.ended != t.Ended {
		if st.unwatch != nil {
			close(st.unwatch)
		}
		st.ended, st.unwatch = t.Ended, make(chan struct{})
		go func(id string, ended <-chan struct{}, unwatch chan struct{}) {
			select {
			case <-ended:
			case <-unwatch:
				return
			}
			s.mu.Lock()
			if s.sessions[id] == st && st.unwatch == unwatch {
				delete(s.sessions, id)
			}
			s.mu.Unlock()
		}(t.SessionID, t.Ended, st.unwatch)
	}
	return st
}

// port returns the port's state (s.mu held).
func (st *sessionState) port(p int) *portState {
	ps := st.ports[p]
	if ps == nil {
		ps = &portState{tokens: map[string]time.Time{}}
		st.ports[p] = ps
	}
	return ps
}

// prune drops expired tokens (s.mu held).
func (ps *portState) prune(now time.Time) {
	for id, exp := range ps.tokens {
		if !now.Before(exp) {
			delete(ps.tokens, id)
		}
	}
}

func (s *Service) describe(sid string, port int, ps *portState) *airlock.PreviewPort {
	out := &airlock.PreviewPort{SessionID: sid, Port: port, Tokens: []airlock.PreviewTokenInfo{}}
	if ps == nil {
		return out
	}
	ps.prune(s.cfg.Now())
	out.Public = ps.public
	for id, exp := range ps.tokens {
		out.Tokens = append(out.Tokens, airlock.PreviewTokenInfo{TokenID: id, ExpiresAt: exp.UTC()})
	}
	sort.Slice(out.Tokens, func(i, j int) bool { return out.Tokens[i].ExpiresAt.Before(out.Tokens[j].ExpiresAt) })
	return out
}

// checkPort refuses a port out of range.
func checkPort(port int) error {
	if port < 1 || port > 65535 {
		return airlock.Problem(airlock.EINVALID, "invalid-port", "port %d is out of range: a port is a number from 1 to 65535", port)
	}
	return nil
}

// owned returns the tenant's live session held by this node.
func (s *Service) owned(ctx context.Context, tenant *airlock.Tenant, sid string, port int) (*airlock.PreviewTarget, error) {
	if err := checkPort(port); err != nil {
		return nil, err
	}
	if tenant == nil {
		return nil, airlock.ErrUnauthorized
	}
	if !ValidSessionID(sid) {
		return nil, airlock.Problem(airlock.ENOTFOUND, "session-not-found", "no session %s", cutID(sid))
	}
	return s.cfg.Targets.PreviewTarget(ctx, tenant, sid)
}

// CreatePreviewToken issues a token for one port of the tenant's session.
func (s *Service) CreatePreviewToken(ctx context.Context, tenant *airlock.Tenant, sid string, port int, ttl time.Duration) (*airlock.PreviewToken, error) {
	if ttl == 0 {
		ttl = DefaultTokenTTL
	}
	if ttl < time.Second || ttl > MaxTokenTTL {
		return nil, airlock.Problem(airlock.EINVALID, "invalid-ttl", "ttl_s must be from 1 to %d seconds", int(MaxTokenTTL/time.Second))
	}
	t, err := s.owned(ctx, tenant, sid, port)
	if err != nil {
		return nil, err
	}
	st := s.state(t)
	now := s.cfg.Now()
	exp := now.Add(ttl).Truncate(time.Second)
	c := claims{SessionID: sid, Port: port, Expires: exp.Unix(), ID: airlock.NewID()[:16]}
	s.mu.Lock()
	ps := st.port(port)
	ps.prune(now)
	if len(ps.tokens) >= MaxTokensPerPort {
		s.mu.Unlock()
		return nil, airlock.Problem(airlock.ERATELIMITED, "preview-too-many-tokens",
			"port %d of session %s has %d live tokens, the most it keeps; revoke some (DELETE .../token)", port, sid, MaxTokensPerPort)
	}
	ps.tokens[c.ID] = exp
	s.mu.Unlock()
	tok := sign(s.key, c)
	out := &airlock.PreviewToken{Token: tok, TokenID: c.ID, SessionID: sid, Port: port, ExpiresAt: exp.UTC(),
		URL: PathPrefix(sid, port) + "/?" + QueryToken + "=" + tok}
	if s.cfg.Domain != "" {
		out.HostURL = "https://" + HostFor(port, sid, s.cfg.Domain) + "/?" + QueryToken + "=" + tok
	}
	return out, nil
}

// RevokePreviewTokens revokes one token of the port, or all of them.
func (s *Service) RevokePreviewTokens(ctx context.Context, tenant *airlock.Tenant, sid string, port int, tokenID string) (*airlock.PreviewPort, error) {
	t, err := s.owned(ctx, tenant, sid, port)
	if err != nil {
		return nil, err
	}
	st := s.state(t)
	s.mu.Lock()
	defer s.mu.Unlock()
	ps := st.port(port)
	if tokenID == "" {
		clear(ps.tokens)
	} else {
		if _, ok := ps.tokens[tokenID]; !ok {
			return nil, airlock.Problem(airlock.ENOTFOUND, "preview-token-not-found", "port %d of session %s has no live token %s", port, sid, cutID(tokenID))
		}
		delete(ps.tokens, tokenID)
	}
	return s.describe(sid, port, ps), nil
}

// SetPreviewPort makes a port public or private.
func (s *Service) SetPreviewPort(ctx context.Context, tenant *airlock.Tenant, sid string, port int, public bool) (*airlock.PreviewPort, error) {
	t, err := s.owned(ctx, tenant, sid, port)
	if err != nil {
		return nil, err
	}
	st := s.state(t)
	s.mu.Lock()
	defer s.mu.Unlock()
	ps := st.port(port)
	ps.public = public
	return s.describe(sid, port, ps), nil
}

// PreviewPort describes a port.
func (s *Service) PreviewPort(ctx context.Context, tenant *airlock.Tenant, sid string, port int) (*airlock.PreviewPort, error) {
	if _, err := s.owned(ctx, tenant, sid, port); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var ps *portState
	if st := s.sessions[sid]; st != nil {
		ps = st.ports[port]
	}
	return s.describe(sid, port, ps), nil
}

// tokenValid reports whether tok opens port of session sid now: its
// signature and expiry hold, it names that session and port, and it is
// still listed (not revoked).
func (s *Service) tokenValid(tok, sid string, port int) bool {
	c, err := verify(s.key, tok, s.cfg.Now())
	if err != nil || c.SessionID != sid || c.Port != port {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.sessions[sid]
	if st == nil || st.ports[port] == nil {
		return false
	}
	exp, ok := st.ports[port].tokens[c.ID]
	return ok && s.cfg.Now().Before(exp)
}

// isPublic reports whether the port was made public.
func (s *Service) isPublic(sid string, port int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.sessions[sid]
	return st != nil && st.ports[port] != nil && st.ports[port].public
}

// PathPrefix is the path-form URL of a port, without a trailing slash.
func PathPrefix(sid string, port int) string {
	return "/v1/sessions/" + sid + "/ports/" + strconv.Itoa(port)
}

// HostFor is the host of a port in the preview domain.
func HostFor(port int, sid, domain string) string {
	return strconv.Itoa(port) + "-" + sid + "." + domain
}

// cutID bounds an ID quoted in a message.
func cutID(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}
