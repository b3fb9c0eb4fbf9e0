package rest

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/airlockhq/airlock"
)

// readyTimeout bounds one readiness check.
const readyTimeout = 5 * time.Second

// Health is the body of a healthy /healthz or /readyz.
type Health struct {
	Status string `json:"status"`
	// MicroVM is how the node's microVM backend runs its guests, "kvm"
	// or "tcg" (emulated: slow, the same isolation); absent without one.
	// Only /readyz says it.
	MicroVM string `json:"microvm,omitempty"`
}

// healthz says the process serves HTTP: GET /healthz.
func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	s.writeJSON(w, r, http.StatusOK, Health{Status: "ok"})
}

// readyz says whether the service can take work: GET /readyz. The reason
// shown for 503 is the message of an *airlock.Error from Config.Ready;
// other errors are logged and shown as "not ready".
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Ready != nil {
		ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
		defer cancel()
		if err := s.cfg.Ready(ctx); err != nil {
			reason := "not ready"
			var e *airlock.Error
			if errors.As(err, &e) && e.Code != airlock.EINTERNAL && e.Message != "" {
				reason = e.Message
			}
			s.log.LogAttrs(r.Context(), slog.LevelWarn, "not ready", slog.String("error", err.Error()))
			s.writeProblem(w, r, newProblem(airlock.EUNAVAILABLE, "not-ready", 0, reason))
			return
		}
	}
	s.writeJSON(w, r, http.StatusOK, Health{Status: "ok", MicroVM: s.cfg.MicroVM})
}
