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
	// Warm marks a check of the warm readiness level: it runs only for
	// GET /readyz?warm=true (the node's warm pool holds its first
	// members), which a load balancer asks so that a node just started
	// gets no request before it can serve one from the pool.
	Warm bool
}

// healthz says the process serves HTTP: GET /healthz.
func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	s.writeJSON(w, r, http.StatusOK, Health{Status: "ok"})
}

// readyz says whether the service can take work: GET /readyz; with
// ?warm=true, also whether it can take it warm (the checks marked Warm). Every
// check runs (at once, each bounded by readyTimeout); the body has one
// member per ReadyCheck, "ok" or its reason. 200 when all are ok, else a
// 503 not-ready problem that carries the same members. Config.Ready, if
// set, is one more check with no member of its own: its reason is the
// problem's detail.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
	defer cancel()
	var warm bool
	switch v := r.URL.Query().Get("warm"); v {
	case "", "false", "0":
	case "true", "1":
		warm = true
	default:
		s.writeProblem(w, r, newProblem(airlock.EINVALID, "invalid", 0, "warm must be true or false"))
		return
	}
	var checks []ReadyCheck
	for _, c := range s.cfg.ReadyChecks {
		if !c.Warm || warm {
			checks = append(checks, c)
		}
	}
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
