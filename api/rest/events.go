package rest

import (
	"net/http"
	"strconv"

	"github.com/airlockhq/airlock"
)

// listEvents pages through the tenant's abuse events, newest first:
// GET /v1/events?limit=&before=. Only the tenant's own; a full page
// carries next_cursor.
func (s *Server) listEvents(w http.ResponseWriter, r *http.Request) {
	tenant := TenantFrom(r.Context())
	if s.cfg.Events == nil {
		s.writeJSON(w, r, http.StatusOK, airlock.AbuseEventPage{Events: []*airlock.AbuseEvent{}})
		return
	}
	q := r.URL.Query()
	limit := DefaultPageLimit
	if v := q.Get("limit"); v != "" || q.Has("limit") {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > MaxPageLimit {
			s.error(w, r, errorf(airlock.EINVALID, "invalid-limit", "limit must be a whole number from 1 to %d", MaxPageLimit))
			return
		}
		limit = n
	}
	before := q.Get("before")
	if len(before) > maxCursorBytes {
		s.error(w, r, errorf(airlock.EINVALID, "invalid-cursor", "before is not a cursor this API returned"))
		return
	}
	evs, err := s.cfg.Events.ListAbuseEvents(r.Context(), airlock.AbuseEventFilter{TenantID: tenant.ID, Limit: limit, Before: before})
	if err != nil {
		s.error(w, r, err)
		return
	}
	page := airlock.AbuseEventPage{Events: evs}
	if page.Events == nil {
		page.Events = []*airlock.AbuseEvent{}
	}
	if len(evs) == limit {
		page.NextCursor = evs[len(evs)-1].ID
	}
	s.writeJSON(w, r, http.StatusOK, page)
}
