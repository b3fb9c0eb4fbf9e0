package rest

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/airlockhq/airlock"
)

// readyTimeout bounds one readiness check.
const readyTimeout = 5 * time.Second

// Health is the body of /healthz, and the fixed members of a ready
// /readyz (which adds one member per ReadyCheck).
type Health struct {
	Status string `json:"status"`
	// MicroVM is how the node's microVM backend runs its guests, "kvm"
	// or "tcg" (emulated: slow, the same isolation); absent without one.
	// Only /readyz says it.
	MicroVM string `json:"microvm,omitempty"`
}

// ReadyCheck is one dependency /readyz checks: its member in the body is
// Name, "ok" or the reason Check gave. The reason shown is the message
// of an *airlock.Error in what Check returns (give it code
// unavailable); any other error is logged and shown as "not ready".
type ReadyCheck struct {
	Name  string
	Check func(ctx context.Context) error
}

// healthz says the process serves HTTP: GET /healthz.
func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	s.writeJSON(w, r, http.StatusOK, Health{Status: "ok"})
}

// readyz says whether the service can take work: GET /readyz. Every
// check runs (at once, each bounded by readyTimeout); the body has one
// member per ReadyCheck, "ok" or its reason. 200 when all are ok, else a
// 503 not-ready problem that carries the same members. Config.Ready, if
// set, is one more check with no member of its own: its reason is the
// problem's detail.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
	defer cancel()
	checks := s.cfg.ReadyChecks
	if s.cfg.Ready != nil {
		checks = append([]ReadyCheck{{Check: s.cfg.Ready}}, checks...)
	}
	errs := make([]error, len(checks))
	var wg sync.WaitGroup
	for i, c := range checks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = c.Check(ctx)
		}()
	}
	wg.Wait()
	members := map[string]any{}
	var reasons []string
	for i, c := range checks {
		if errs[i] == nil {
			if c.Name != "" {
				members[c.Name] = "ok"
			}
			continue
		}
		reason := "not ready"
		var e *airlock.Error
		if errors.As(errs[i], &e) && e.Code != airlock.EINTERNAL && e.Message != "" {
			reason = e.Message
		}
		s.log.LogAttrs(r.Context(), slog.LevelWarn, "not ready", slog.String("check", c.Name), slog.String("error", errs[i].Error()))
		if c.Name == "" {
			reasons = append(reasons, reason)
			continue
		}
		members[c.Name] = reason
		reasons = append(reasons, c.Name+": "+reason)
	}
	if len(reasons) > 0 {
		p := newProblem(airlock.EUNAVAILABLE, "not-ready", 0, strings.Join(reasons, "; "))
		p.Extensions = members
		s.writeProblem(w, r, p)
		return
	}
	members["status"] = "ok"
	if s.cfg.MicroVM != "" {
		members["microvm"] = s.cfg.MicroVM
	}
	s.writeJSON(w, r, http.StatusOK, members)
}
