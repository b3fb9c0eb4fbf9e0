package rest

import (
	"net/http"
	"time"

	"github.com/airlockhq/airlock"
)

// sessionMetrics answers the resource samples of a session, live or
// ended: GET /v1/sessions/{id}/metrics?start=&end= (RFC 3339, both
// optional and inclusive), oldest first. Another tenant's session is 404
// like a missing one.
func (s *Server) sessionMetrics(w http.ResponseWriter, r *http.Request) {
	svc, ok := s.sessions(w, r)
	if !ok {
		return
	}
	ms, ok := svc.(airlock.SessionMetricsService)
	if !ok {
		s.error(w, r, errorf(airlock.ENOTIMPLEMENTED, "metrics-unavailable", "this server keeps no session metrics"))
		return
	}
	var f airlock.MetricsFilter
	q := r.URL.Query()
	for _, p := range []struct {
		name string
		to   *time.Time
	}{{"start", &f.Start}, {"end", &f.End}} {
		v := q.Get(p.name)
		if v == "" {
			continue
		}
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			s.error(w, r, errorf(airlock.EINVALID, "invalid-time", "%s must be an RFC 3339 time such as 2026-01-02T15:04:05Z, not %q", p.name, v))
			return
		}
		*p.to = t
	}
	if !f.Start.IsZero() && !f.End.IsZero() && f.End.Before(f.Start) {
		s.error(w, r, errorf(airlock.EINVALID, "invalid-time", "end (%s) is before start (%s)", q.Get("end"), q.Get("start")))
		return
	}
	m, err := ms.SessionMetrics(r.Context(), TenantFrom(r.Context()), r.PathValue("id"), f)
	if err != nil {
		s.error(w, r, err)
		return
	}
	s.writeJSON(w, r, http.StatusOK, m)
}
