package rest

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"

	"github.com/airlockhq/airlock"
)

// MinMetricsKeyBytes is the shortest Config.MetricsKey.
const MinMetricsKeyBytes = 16

// ValidateMetricsKey checks a metrics key: at least MinMetricsKeyBytes of
// printable ASCII without spaces (it travels in a header).
func ValidateMetricsKey(key string) error {
	if len(key) < MinMetricsKeyBytes || len(key) > maxKeyBytes {
		return airlock.Errorf(airlock.EINVALID, "httpapi: metrics key must be %d to %d bytes", MinMetricsKeyBytes, maxKeyBytes)
	}
	for i := 0; i < len(key); i++ {
		if key[i] < 0x21 || key[i] > 0x7e {
			return airlock.Errorf(airlock.EINVALID, "httpapi: metrics key must be printable ASCII without spaces")
		}
	}
	return nil
}

// metrics serves the node's Prometheus metrics, when configured: with the
// metrics key if one is set; without one only on a server that listens on
// loopback alone.
func (s *Server) metrics(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Metrics == nil {
		s.error(w, r, airlock.Problem(airlock.ENOTFOUND, "metrics-disabled", "metrics are not enabled on this server"))
		return
	}
	switch {
	case s.cfg.MetricsKey != "":
		key, ok := bearerKey(r.Header.Get("Authorization"))
		sum := sha256.Sum256([]byte(key))
		if !ok || subtle.ConstantTimeCompare(sum[:], s.metricsSum[:]) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="airlock-metrics"`)
			s.writeProblem(w, r, newProblem(airlock.EUNAUTHORIZED, "unauthorized", 0,
				"GET /metrics needs Authorization: Bearer <the metrics key>"))
			return
		}
	case !s.cfg.LoopbackOnly:
		s.writeProblem(w, r, newProblem(airlock.EFORBIDDEN, "metrics-key-required", 0,
			"/metrics is closed: this server listens beyond loopback and has no metrics key; the operator must set airlockd --metrics-key (env AIRLOCK_METRICS_KEY)"))
		return
	}
	s.cfg.Metrics.ServeHTTP(w, r)
}
