package rest

import (
	"net/http"

	"github.com/airlockhq/airlock"
)

// usage serves GET /v1/usage: the tenant's use of each of its quotas.
func (s *Server) usage(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Usage == nil {
		s.error(w, r, errorf(airlock.ENOTIMPLEMENTED, "usage-disabled", "this server keeps no quotas"))
		return
	}
	u, err := s.cfg.Usage.Usage(r.Context(), TenantFrom(r.Context()))
	if err != nil {
		s.error(w, r, err)
		return
	}
	s.writeJSON(w, r, http.StatusOK, u)
}
