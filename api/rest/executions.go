package rest

import (
	"net/http"
	"strconv"

	"github.com/airlockhq/airlock"
)

// Page sizes of GET /v1/executions.
const (
	DefaultPageLimit = 50
	MaxPageLimit     = 500
	maxCursorBytes   = 200
)

// listExecutions pages through the tenant's executions, newest first:
// GET /v1/executions?limit=&before=. A full page carries next_cursor (its
// last ID), to pass as before= for the next.
func (s *Server) listExecutions(w http.ResponseWriter, r *http.Request) {
	tenant := TenantFrom(r.Context())
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
	es, err := s.cfg.Store.ListExecutions(r.Context(), airlock.ExecutionFilter{
		TenantID: tenant.ID,
		Limit:    limit,
		Before:   before,
	})
	if err != nil {
		s.error(w, r, err)
		return
	}
	page := airlock.ExecutionPage{Executions: make([]*airlock.Execution, 0, len(es))}
	for _, e := range es {
		page.Executions = append(page.Executions, s.withArtifactURLs(r, tenant, e))
	}
	if len(es) == limit {
		page.NextCursor = es[len(es)-1].ID
	}
	s.writeJSON(w, r, http.StatusOK, page)
}

// getExecution returns one of the tenant's executions with signed artifact
// URLs: GET /v1/executions/{id}. Another tenant's is 404, like a missing
// one.
func (s *Server) getExecution(w http.ResponseWriter, r *http.Request) {
	tenant := TenantFrom(r.Context())
	id := r.PathValue("id")
	e, err := s.cfg.Store.Execution(r.Context(), tenant.ID, id)
	if airlock.ErrorCode(err) == airlock.ENOTFOUND {
		s.error(w, r, airlock.Problem(airlock.ENOTFOUND, "", "execution %q not found", id))
		return
	} else if err != nil {
		s.error(w, r, err)
		return
	}
	s.writeJSON(w, r, http.StatusOK, s.withArtifactURLs(r, tenant, e))
}
