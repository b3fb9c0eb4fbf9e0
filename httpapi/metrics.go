package httpapi

import (
	"net/http"

	"github.com/airlockhq/airlock"
)

// metrics serves the node's Prometheus metrics, when configured.
func (s *Server) metrics(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Metrics == nil {
		s.error(w, r, airlock.Problem(airlock.ENOTFOUND, "metrics-disabled", "metrics are not enabled on this server"))
		return
	}
	s.cfg.Metrics.ServeHTTP(w, r)
}
