package rest

import (
	"net/http"
	"net/url"
	"strconv"

	"github.com/airlockhq/airlock"
)

// sessions returns the session service, or answers 501 when the server
// has none.
func (s *Server) sessions(w http.ResponseWriter, r *http.Request) (airlock.SessionService, bool) {
	if s.cfg.Sessions == nil {
		s.error(w, r, errorf(airlock.ENOTIMPLEMENTED, "sessions-disabled", "sessions are not enabled on this server"))
		return nil, false
	}
	return s.cfg.Sessions, true
}

// decodeBody checks the media type and decodes a JSON body into v,
// answering with a problem if it cannot.
func (s *Server) decodeBody(w http.ResponseWriter, r *http.Request, v any) bool {
	if !isJSONContentType(r.Header.Get("Content-Type")) {
		s.unsupportedMediaType(w, r)
		return false
	}
	if err := decodeJSON(w, r, v); err != nil {
		s.error(w, r, err)
		return false
	}
	return true
}

// createSession makes a session: POST /v1/sessions. 201 with the new
// session; with an Idempotency-Key that made one before (same body), 200
// with that session.
func (s *Server) createSession(w http.ResponseWriter, r *http.Request) {
	svc, ok := s.sessions(w, r)
	if !ok {
		return
	}
	keys := r.Header.Values("Idempotency-Key")
	if len(keys) > 1 {
		s.error(w, r, errorf(airlock.EINVALID, "invalid-idempotency-key", "Idempotency-Key must be sent once"))
		return
	}
	key := ""
	if len(keys) == 1 {
		key = keys[0]
		if !airlock.ValidIdempotencyKey(key) {
			s.error(w, r, errorf(airlock.EINVALID, "invalid-idempotency-key", "Idempotency-Key must be 1 to %d printable ASCII characters without spaces", airlock.MaxIdempotencyKeyBytes))
			return
		}
	}
	var req airlock.CreateSessionRequest
	if !s.decodeBody(w, r, &req) {
		return
	}
	sess, created, err := svc.CreateSession(r.Context(), TenantFrom(r.Context()), req, key)
	if err != nil {
		s.error(w, r, err)
		return
	}
	w.Header().Set("Location", "/v1/sessions/"+url.PathEscape(sess.ID))
	if !created {
		w.Header().Set("Idempotent-Replayed", "true")
		s.writeJSON(w, r, http.StatusOK, sess)
		return
	}
	s.writeJSON(w, r, http.StatusCreated, sess)
}

// listSessions pages through the tenant's sessions, newest first:
// GET /v1/sessions?limit=&before=&state=live|all.
func (s *Server) listSessions(w http.ResponseWriter, r *http.Request) {
	svc, ok := s.sessions(w, r)
	if !ok {
		return
	}
	q := r.URL.Query()
	f := airlock.SessionFilter{Limit: DefaultPageLimit, Before: q.Get("before")}
	if v := q.Get("limit"); v != "" || q.Has("limit") {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > MaxPageLimit {
			s.error(w, r, errorf(airlock.EINVALID, "invalid-limit", "limit must be a whole number from 1 to %d", MaxPageLimit))
			return
		}
		f.Limit = n
	}
	if len(f.Before) > maxCursorBytes {
		s.error(w, r, errorf(airlock.EINVALID, "invalid-cursor", "before is not a cursor this API returned"))
		return
	}
	switch q.Get("state") {
	case "", "all":
	case "live":
		f.LiveOnly = true
	default:
		s.error(w, r, errorf(airlock.EINVALID, "invalid-state-filter", "state must be live or all"))
		return
	}
	page, err := svc.ListSessions(r.Context(), TenantFrom(r.Context()), f)
	if err != nil {
		s.error(w, r, err)
		return
	}
	s.writeJSON(w, r, http.StatusOK, page)
}

// getSession returns one of the tenant's sessions: GET /v1/sessions/{id}.
func (s *Server) getSession(w http.ResponseWriter, r *http.Request) {
	svc, ok := s.sessions(w, r)
	if !ok {
		return
	}
	sess, err := svc.Session(r.Context(), TenantFrom(r.Context()), r.PathValue("id"))
	if err != nil {
		s.error(w, r, err)
		return
	}
	s.writeJSON(w, r, http.StatusOK, sess)
}

// deleteSession destroys a session and returns its final record:
// DELETE /v1/sessions/{id}. A session that has ended already is returned
// as it is.
func (s *Server) deleteSession(w http.ResponseWriter, r *http.Request) {
	svc, ok := s.sessions(w, r)
	if !ok {
		return
	}
	sess, err := svc.DeleteSession(r.Context(), TenantFrom(r.Context()), r.PathValue("id"))
	if err != nil {
		s.error(w, r, err)
		return
	}
	s.writeJSON(w, r, http.StatusOK, sess)
}

// ExtendRequest is the body of POST /v1/sessions/{id}/timeout.
type ExtendRequest struct {
	TimeoutS int `json:"timeout_s"`
}

// extendSession sets a session to expire timeout_s from now, within the
// maximum lifetime: POST /v1/sessions/{id}/timeout.
func (s *Server) extendSession(w http.ResponseWriter, r *http.Request) {
	svc, ok := s.sessions(w, r)
	if !ok {
		return
	}
	var req ExtendRequest
	if !s.decodeBody(w, r, &req) {
		return
	}
	if req.TimeoutS < 1 {
		s.error(w, r, errorf(airlock.EINVALID, "timeout-out-of-range", "timeout_s is required: seconds from now, at least 1"))
		return
	}
	sess, err := svc.ExtendSession(r.Context(), TenantFrom(r.Context()), r.PathValue("id"), req.TimeoutS)
	if err != nil {
		s.error(w, r, err)
		return
	}
	s.writeJSON(w, r, http.StatusOK, sess)
}
