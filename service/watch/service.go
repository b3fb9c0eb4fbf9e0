package watch

import (
	"context"
	"strings"
	"time"

	"github.com/airlockhq/airlock"
)

// Defaults of Config.
const (
	DefaultMaxWatchers = 8
	DefaultQueueBytes  = 1 << 20
	DefaultKeepBytes   = 64 << 10
)

// Config configures New.
type Config struct {
	// Sessions is the service to wrap. Required.
	Sessions airlock.SessionService
	// MaxWatchers bounds the watches of one session at once; more are a
	// 429 (DefaultMaxWatchers if zero).
	MaxWatchers int
	// QueueBytes bounds the events waiting for one watcher; past it the
	// watcher is dropped (DefaultQueueBytes if zero).
	QueueBytes int
	// KeepBytes is how much of a running exec's or cell's latest output
	// is kept for a watcher that comes late (DefaultKeepBytes if zero).
	KeepBytes int
	Now       func() time.Time // time.Now if nil
}

// Validate reports whether c can be used.
func (c Config) Validate() error {
	switch {
	case c.Sessions == nil:
		return airlock.Errorf(airlock.EINVALID, "watch: a session service is required")
	case c.MaxWatchers < 0 || c.QueueBytes < 0 || c.KeepBytes < 0:
		return airlock.Errorf(airlock.EINVALID, "watch: limits must not be negative")
	}
	return nil
}

// Service is a session service whose sessions can be watched.
type Service struct {
	airlock.SessionService
	hub *hub
	now func() time.Time
}

var (
	_ airlock.SessionService        = (*Service)(nil)
	_ airlock.SessionWatcher        = (*Service)(nil)
	_ airlock.SessionNetworkService = (*Service)(nil)
	_ airlock.SessionMetricsService = (*Service)(nil)
)

// New wraps cfg.Sessions.
func New(cfg Config) (*Service, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.MaxWatchers == 0 {
		cfg.MaxWatchers = DefaultMaxWatchers
	}
	if cfg.QueueBytes == 0 {
		cfg.QueueBytes = DefaultQueueBytes
	}
	if cfg.KeepBytes == 0 {
		cfg.KeepBytes = DefaultKeepBytes
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Service{SessionService: cfg.Sessions, now: cfg.Now, hub: newHub(cfg.MaxWatchers, cfg.QueueBytes, cfg.KeepBytes)}, nil
}

// errNoNetwork is what the network side answers when the wrapped service
// has none (the HTTP layer's own answer then).
var errNoNetwork = airlock.Problem(airlock.ENOTIMPLEMENTED, "network-disabled", "sessions on this server have no network")

// SetSessionNetwork is the wrapped service's, if it has a network side.
func (s *Service) SetSessionNetwork(ctx context.Context, tenant *airlock.Tenant, id string, p airlock.NetworkPolicy) (*airlock.Session, error) {
	if n, ok := s.SessionService.(airlock.SessionNetworkService); ok {
		return n.SetSessionNetwork(ctx, tenant, id, p)
	}
	return nil, errNoNetwork
}

// SessionEgress is the wrapped service's, if it has a network side.
func (s *Service) SessionEgress(ctx context.Context, tenant *airlock.Tenant, id string, f airlock.EgressFilter) (*airlock.EgressPage, error) {
	if n, ok := s.SessionService.(airlock.SessionNetworkService); ok {
		return n.SessionEgress(ctx, tenant, id, f)
	}
	return nil, errNoNetwork
}

// SessionMetrics is the wrapped service's, if it samples its sessions.
func (s *Service) SessionMetrics(ctx context.Context, tenant *airlock.Tenant, id string, f airlock.MetricsFilter) (*airlock.SessionMetrics, error) {
	if m, ok := s.SessionService.(airlock.SessionMetricsService); ok {
		return m.SessionMetrics(ctx, tenant, id, f)
	}
	return nil, airlock.Problem(airlock.ENOTIMPLEMENTED, "metrics-unavailable", "this server keeps no session metrics")
}

// Close ends every watch (a server that stops: its streams must end for
// it to stop). Calls go on as before; new watches are refused.
func (s *Service) Close() { s.hub.close() }

// Unwrap returns the wrapped service.
func (s *Service) Unwrap() airlock.SessionService { return s.SessionService }

// WatchSession starts a watch of the tenant's session.
func (s *Service) WatchSession(ctx context.Context, tenant *airlock.Tenant, id string) (airlock.SessionFeed, error) {
	sess, err := s.SessionService.Session(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	if !sess.State.Live() {
		return nil, airlock.Problem(airlock.ECONFLICT, "session-ended", "session %s has ended (%s)", id, sess.EndReason)
	}
	return s.hub.watch(id)
}

// Exec runs the command through the wrapped service, publishing its
// output.
func (s *Service) Exec(ctx context.Context, tenant *airlock.Tenant, id string, req airlock.SessionExecRequest, obs airlock.ExecObserver) (*airlock.Execution, error) {
	r := s.hub.begin(id, "exec", commandLine(req))
	t := &execTee{next: obs, r: r, now: s.now}
	e, err := s.SessionService.Exec(ctx, tenant, id, req, t)
	end := airlock.SessionEvent{}
	if e != nil {
		code := e.ExitCode
		end.ExitCode, end.TimedOut, end.DurationMS, end.ExecutionID = &code, e.TimedOut, e.DurationMS, e.ID
	}
	if err != nil {
		end.Error = airlock.ErrorMessage(err)
	}
	r.end(end)
	return e, err
}

// RunCell runs the cell through the wrapped service, publishing its
// output.
func (s *Service) RunCell(ctx context.Context, tenant *airlock.Tenant, id, contextID string, req airlock.RunCellRequest, obs airlock.CellObserver) (*airlock.CellResult, error) {
	r := s.hub.begin(id, "cell", firstLine(req.Code))
	t := &cellTee{next: obs, r: r, now: s.now}
	res, err := s.SessionService.RunCell(ctx, tenant, id, contextID, req, t)
	end := airlock.SessionEvent{}
	if res != nil {
		code := 0
		if res.Error != nil {
			code = 1
			end.Error = res.Error.Name
		}
		if res.TimedOut {
			code = 137
		}
		end.ExitCode, end.TimedOut, end.DurationMS, end.ExecutionID = &code, res.TimedOut, res.DurationMS, res.ExecutionID
	}
	if err != nil {
		end.Error = airlock.ErrorMessage(err)
	}
	r.end(end)
	return res, err
}

// DeleteSession ends the session's watches once it is gone.
func (s *Service) DeleteSession(ctx context.Context, tenant *airlock.Tenant, id string) (*airlock.Session, error) {
	sess, err := s.SessionService.DeleteSession(ctx, tenant, id)
	if err == nil {
		s.hub.closeSession(id)
	}
	return sess, err
}

// execTee passes an exec's events on and publishes them.
type execTee struct {
	next airlock.ExecObserver
	r    *run
	now  func() time.Time
}

func (t *execTee) Started(executionID string, pid int) {
	at := t.now()
	t.r.start(airlock.SessionEvent{ExecutionID: executionID, PID: pid, StartedAt: &at})
	if t.next != nil {
		t.next.Started(executionID, pid)
	}
}

func (t *execTee) Stdout(p []byte) {
	t.r.output(airlock.EventStdout, p)
	if t.next != nil {
		t.next.Stdout(p)
	}
}

func (t *execTee) Stderr(p []byte) {
	t.r.output(airlock.EventStderr, p)
	if t.next != nil {
		t.next.Stderr(p)
	}
}

// cellTee passes a cell's events on and publishes them.
type cellTee struct {
	next airlock.CellObserver
	r    *run
	now  func() time.Time
}

func (t *cellTee) Started(contextID string) {
	at := t.now()
	t.r.start(airlock.SessionEvent{ContextID: contextID, StartedAt: &at})
	if t.next != nil {
		t.next.Started(contextID)
	}
}

func (t *cellTee) Stdout(p []byte) {
	t.r.output(airlock.EventStdout, p)
	if t.next != nil {
		t.next.Stdout(p)
	}
}

func (t *cellTee) Stderr(p []byte) {
	t.r.output(airlock.EventStderr, p)
	if t.next != nil {
		t.next.Stderr(p)
	}
}

// maxCommandChars bounds the command shown in a start event.
const maxCommandChars = 200

func commandLine(req airlock.SessionExecRequest) string {
	if req.Shell != "" {
		return clip(req.Shell)
	}
	var b []byte
	for i, a := range req.Cmd {
		if i > 0 {
			b = append(b, ' ')
		}
		b = append(b, a...)
		if len(b) > 4*maxCommandChars {
			break
		}
	}
	return clip(string(b))
}

func firstLine(code string) string {
	for i := 0; i < len(code); i++ {
		if code[i] == '\n' {
			return clip(code[:i])
		}
	}
	return clip(code)
}

// clip cuts s to maxCommandChars characters of valid UTF-8.
func clip(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	n := 0
	for i := range s {
		if n == maxCommandChars {
			return s[:i] + "…"
		}
		n++
	}
	return s
}
