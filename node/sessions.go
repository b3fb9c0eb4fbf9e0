package node

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/service/provision"
	"github.com/airlockhq/airlock/service/run"
	"github.com/airlockhq/airlock/service/session"
)

// sessionStore is what the session manager keeps its records in:
// tenants, and sessions with their idempotency keys.
type sessionStore interface {
	airlock.Store
	airlock.SessionStore
}

// newSessions makes the session manager.
func newSessions(o SessionsConfig, keep session.KeepConfig, events airlock.EventSink, prov *provision.Provisioner, runner *run.Runner, images airlock.ImageResolver, store sessionStore, eg airlock.Egress, egLog airlock.EgressStore, templates airlock.TemplateResolver, vols session.Volumes, adjust func(*session.Config), logger *slog.Logger) (*session.Manager, error) {
	cfg := session.Config{
		Provisioner:    prov,
		Runner:         runner,
		Images:         images,
		Templates:      templates,
		Store:          store,
		Sessions:       store,
		Egress:         eg,
		EgressLog:      egLog,
		Sizes:          o.Sizes,
		DefaultTimeout: o.Timeout,
		MaxLifetime:    o.MaxLifetime,
		IdleTimeout:    o.IdleTimeout,
		ExecTimeout:    o.ExecTimeout,
		MaxExecTimeout: o.MaxExecTimeout,
		Keep:           keep,
		Events:         events,
		Volumes:        vols,
		Logger:         logger,
		SampleInterval: o.SampleInterval,
	}
	if st, ok := templates.(session.SessionTemplates); ok {
		cfg.SessionTemplates = st
	}
	if ms, ok := store.(airlock.SessionMetricsStore); ok {
		cfg.Metrics = ms
	}
	if adjust != nil {
		adjust(&cfg)
	}
	return session.New(cfg)
}

// recoverSessions takes back the sessions an earlier run left live: their
// sandboxes are reattached, or the sessions ended with the reason.
func recoverSessions(ctx context.Context, m *session.Manager, logger *slog.Logger) error {
	start := time.Now()
	rep, err := m.Recover(ctx)
	if rep.Reattached+rep.Ended+rep.Paused > 0 {
		logger.Info("sessions recovered", "reattached", rep.Reattached, "ended", rep.Ended, "paused", rep.Paused,
			"programs_adopted", rep.Adopted, "runs_interrupted", rep.Interrupted, "took", time.Since(start))
	}
	if err != nil {
		// A session whose sandbox could not be taken back is ended and
		// recorded, which is no error; what is left is a store that
		// failed. The start stops then, before the reconciler would end
		// sandboxes whose sessions are still live in the store: the
		// next start takes them back.
		return fmt.Errorf("recovering sessions (their sandboxes are left running for the next start): %w", err)
	}
	return nil
}

// warmSessions readies the image/size pairs of --warm-sessions.
func warmSessions(ctx context.Context, o SessionsConfig, m *session.Manager, logger *slog.Logger) error {
	for _, w := range o.Warm {
		name, size, ok := strings.Cut(w, "/")
		if !ok || !airlock.SessionSize(size).Valid() {
			return fmt.Errorf("bad --warm-sessions pair %q (want image/size, size small, medium or large)", w)
		}
		if err := m.Warm(ctx, name, airlock.SessionSize(size)); err != nil {
			logger.Warn("not readying sessions of an image: it is not available", "pair", w, "err", err)
		}
	}
	return nil
}

// detachSessions leaves every live session running for the next start.
func detachSessions(m *session.Manager, logger *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := m.Detach(ctx); err != nil {
		logger.Error("leaving sessions for the next start", "err", err)
	}
}

// closeSessions destroys every live session (end reason shutdown). It is
// safe to call more than once.
func closeSessions(m *session.Manager, logger *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := m.Close(ctx); err != nil {
		logger.Error("ending sessions", "err", err)
	}
}
