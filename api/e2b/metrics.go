package e2b

import (
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/airlockhq/airlock"
)

// sandboxMetric is E2B's SandboxMetric: one sample of a sandbox's
// resource use (CPU in percent of its CPUs, sizes in bytes).
type sandboxMetric struct {
	Timestamp     time.Time `json:"timestamp"`
	TimestampUnix int64     `json:"timestampUnix"`
	CPUCount      int       `json:"cpuCount"`
	CPUUsedPct    float64   `json:"cpuUsedPct"`
	MemUsed       int64     `json:"memUsed"`
	MemTotal      int64     `json:"memTotal"`
	DiskUsed      int64     `json:"diskUsed"`
	DiskTotal     int64     `json:"diskTotal"`
}

// metrics answers GET /sandboxes/{id}/metrics?start=&end= (Unix seconds,
// both optional): the session's samples as E2B's SandboxMetric array,
// oldest first.
func (s *Server) metrics(w http.ResponseWriter, r *http.Request, t *airlock.Tenant, id string) error {
	sess, _, err := s.liveSandbox(r.Context(), t, id)
	if err != nil {
		return err
	}
	var f airlock.MetricsFilter
	for _, p := range []struct {
		name string
		to   *time.Time
	}{{"start", &f.Start}, {"end", &f.End}} {
		v := r.URL.Query().Get(p.name)
		if v == "" {
			continue
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 || n > 1<<40 {
			return errorf(400, p.name+" must be a Unix time in seconds")
		}
		*p.to = time.Unix(n, 0).UTC()
	}
	if !f.End.IsZero() {
		f.End = f.End.Add(time.Second - 1) // the whole second
	}
	if !f.Start.IsZero() && !f.End.IsZero() && f.End.Before(f.Start) {
		return errorf(400, "end is before start")
	}
	ms, ok := s.cfg.Sessions.(airlock.SessionMetricsService)
	if !ok {
		return errorf(501, "this server keeps no sandbox metrics")
	}
	m, err := ms.SessionMetrics(r.Context(), t, id, f)
	if err != nil {
		return err
	}
	out := make([]sandboxMetric, 0, len(m.Samples))
	for _, x := range m.Samples {
		out = append(out, sandboxMetric{
			Timestamp: x.At, TimestampUnix: x.At.Unix(),
			CPUCount: int(math.Ceil(sess.Limits.CPUs)), CPUUsedPct: x.CPUPct,
			MemUsed: x.MemoryBytes, MemTotal: sess.Limits.MemoryBytes,
			DiskUsed: x.DiskBytes, DiskTotal: sess.Limits.DiskBytes,
		})
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}
