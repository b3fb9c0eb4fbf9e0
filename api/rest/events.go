package rest

import (
	"net/http"
	"strconv"

	"github.com/airlockhq/airlock"
)

// listEvents serves GET /v1/events. With a cursor parameter (empty for
// the oldest) it is the event feed: the tenant's session transitions and
// abuse decisions, oldest first, after the cursor (see feed). Without
// one it pages through the tenant's abuse events, newest first
// (?limit=&before=), as before the feed: old clients keep working. Only
// the tenant's own; a full page carries next_cursor.
func (s *Server) listEvents(w http.ResponseWriter, r *http.Request) {
	tenant := TenantFrom(r.Context())
	if r.URL.Query().Has("cursor") {
		s.feed(w, r, tenant.ID)
		return
	}
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

// feed answers a page of the event feed of one tenant (tenantID), or of
// every tenant ("", the operator's view): ?cursor=&limit=, oldest first,
// or with order=newest newest first (the cursor then reads the older
// events); session_id= keeps one session's events. next_cursor is the ID
// of the page's last event (the cursor given when there is none): pass
// it back to read on.
func (s *Server) feed(w http.ResponseWriter, r *http.Request, tenantID string) {
	q := r.URL.Query()
	limit, err := pageLimit(q.Get("limit"), q.Has("limit"))
	if err != nil {
		s.error(w, r, err)
		return
	}
	cursor := q.Get("cursor")
	if len(cursor) > maxCursorBytes {
		s.error(w, r, errorf(airlock.EINVALID, "invalid-cursor", "cursor is not a cursor this API returned"))
		return
	}
	f := airlock.EventFilter{TenantID: tenantID, SessionID: q.Get("session_id"), After: cursor, Limit: limit}
	switch q.Get("order") {
	case "", "oldest":
	case "newest":
		f.Newest = true
	default:
		s.error(w, r, errorf(airlock.EINVALID, "invalid-filter", "order must be oldest or newest"))
		return
	}
	if len(f.SessionID) > maxCursorBytes {
		s.error(w, r, errorf(airlock.EINVALID, "invalid-filter", "session_id is not a session ID"))
		return
	}
	page := airlock.EventPage{Events: []*airlock.Event{}, NextCursor: cursor}
	if s.cfg.Feed != nil {
		evs, err := s.cfg.Feed.ListEvents(r.Context(), f)
		if err != nil {
			s.error(w, r, err)
			return
		}
		if len(evs) > 0 {
			page.Events = evs
			page.NextCursor = evs[len(evs)-1].ID
		}
	}
	s.writeJSON(w, r, http.StatusOK, page)
}
