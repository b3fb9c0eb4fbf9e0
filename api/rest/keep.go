package rest

import (
	"net/http"
	"net/url"
	"strconv"

	"github.com/airlockhq/airlock"
)

// Snapshots, pause and resume, fork (airlock.KeepService).

// keep returns the keep service, or answers 501 when the server has none.
func (s *Server) keep(w http.ResponseWriter, r *http.Request) (airlock.KeepService, bool) {
	k := s.cfg.Keep
	if k == nil {
		k, _ = s.cfg.Sessions.(airlock.KeepService)
	}
	if k == nil {
		s.error(w, r, errorf(airlock.ENOTIMPLEMENTED, "keep-disabled", "snapshots, pause and fork are not enabled on this server"))
		return nil, false
	}
	return k, true
}

// decodeOptional decodes a JSON body into v when there is one; an empty
// body keeps v's zero value.
func (s *Server) decodeOptional(w http.ResponseWriter, r *http.Request, v any) bool {
	if r.ContentLength == 0 {
		return true
	}
	return s.decodeBody(w, r, v)
}

// createSnapshot saves a session's workspace, sealed:
// POST /v1/sessions/{id}/snapshots. 201 with the snapshot.
func (s *Server) createSnapshot(w http.ResponseWriter, r *http.Request) {
	k, ok := s.keep(w, r)
	if !ok {
		return
	}
	var req airlock.CreateSnapshotRequest
	if !s.decodeOptional(w, r, &req) {
		return
	}
	snap, err := k.CreateSnapshot(r.Context(), TenantFrom(r.Context()), r.PathValue("id"), req)
	if err != nil {
		s.error(w, r, err)
		return
	}
	w.Header().Set("Location", "/v1/snapshots/"+url.PathEscape(snap.ID))
	s.writeJSON(w, r, http.StatusCreated, snap)
}

// listSnapshots pages through the tenant's snapshots, newest first:
// GET /v1/snapshots?limit=&before=.
func (s *Server) listSnapshots(w http.ResponseWriter, r *http.Request) {
	k, ok := s.keep(w, r)
	if !ok {
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
	page, err := k.ListSnapshots(r.Context(), TenantFrom(r.Context()), before, limit)
	if err != nil {
		s.error(w, r, err)
		return
	}
	s.writeJSON(w, r, http.StatusOK, page)
}

// getSnapshot returns one of the tenant's snapshots: GET /v1/snapshots/{id}.
func (s *Server) getSnapshot(w http.ResponseWriter, r *http.Request) {
	k, ok := s.keep(w, r)
	if !ok {
		return
	}
	snap, err := k.Snapshot(r.Context(), TenantFrom(r.Context()), r.PathValue("id"))
	if err != nil {
		s.error(w, r, err)
		return
	}
	s.writeJSON(w, r, http.StatusOK, snap)
}

// deleteSnapshot deletes a snapshot and its data: DELETE /v1/snapshots/{id}.
// 204.
func (s *Server) deleteSnapshot(w http.ResponseWriter, r *http.Request) {
	k, ok := s.keep(w, r)
	if !ok {
		return
	}
	if err := k.DeleteSnapshot(r.Context(), TenantFrom(r.Context()), r.PathValue("id")); err != nil {
		s.error(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// pauseSession saves a session to disk and frees its sandbox:
// POST /v1/sessions/{id}/pause. 200 with the paused session.
func (s *Server) pauseSession(w http.ResponseWriter, r *http.Request) {
	k, ok := s.keep(w, r)
	if !ok {
		return
	}
	sess, err := k.PauseSession(r.Context(), TenantFrom(r.Context()), r.PathValue("id"))
	if err != nil {
		s.error(w, r, err)
		return
	}
	s.writeJSON(w, r, http.StatusOK, sess)
}

// resumeSession restores a paused session: POST /v1/sessions/{id}/resume.
// 200 with the session, ready.
func (s *Server) resumeSession(w http.ResponseWriter, r *http.Request) {
	k, ok := s.keep(w, r)
	if !ok {
		return
	}
	sess, err := k.ResumeSession(r.Context(), TenantFrom(r.Context()), r.PathValue("id"))
	if err != nil {
		s.error(w, r, err)
		return
	}
	s.writeJSON(w, r, http.StatusOK, sess)
}

// forkSession makes new sessions from one: POST /v1/sessions/{id}/fork.
// 201 with the new sessions.
func (s *Server) forkSession(w http.ResponseWriter, r *http.Request) {
	k, ok := s.keep(w, r)
	if !ok {
		return
	}
	var req airlock.ForkRequest
	if !s.decodeOptional(w, r, &req) {
		return
	}
	res, err := k.ForkSession(r.Context(), TenantFrom(r.Context()), r.PathValue("id"), req)
	if err != nil {
		s.error(w, r, err)
		return
	}
	s.writeJSON(w, r, http.StatusCreated, res)
}

// sessionTemplate makes a template of a session's filesystem (and with
// include_memory its memory): POST /v1/sessions/{id}/template. 202 with
// the template, building, as GET /v1/templates/{name} shows it.
func (s *Server) sessionTemplate(w http.ResponseWriter, r *http.Request) {
	k, ok := s.keep(w, r)
	if !ok {
		return
	}
	var req airlock.SessionTemplateRequest
	if !s.decodeBody(w, r, &req) {
		return
	}
	t, err := k.TemplateFromSession(r.Context(), TenantFrom(r.Context()), r.PathValue("id"), req)
	if err != nil {
		s.error(w, r, err)
		return
	}
	w.Header().Set("Location", "/v1/templates/"+url.PathEscape(t.Name))
	s.writeJSON(w, r, http.StatusAccepted, t)
}
