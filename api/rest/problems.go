package rest

import (
	"net/http"

	"github.com/airlockhq/airlock/internal/problem"
)

// problemCatalogue answers GET /problems: every problem type the API
// answers (internal/problem's catalogue), as HTML or JSON.
func (s *Server) problemCatalogue(w http.ResponseWriter, r *http.Request) {
	problem.ServeCatalogue(w, r)
}

// problemEntry answers GET /problems/{slug}, where a problem document's
// type (/problems/<slug>) resolves.
func (s *Server) problemEntry(w http.ResponseWriter, r *http.Request) {
	problem.ServeEntry(w, r, r.PathValue("slug"))
}
