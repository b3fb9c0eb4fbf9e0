package run

import "github.com/prometheus/client_golang/prometheus"

// metrics are the runner's Prometheus series.
type metrics struct {
	phase      *prometheus.HistogramVec
	executions *prometheus.CounterVec
}

// latencyBuckets cover 1 ms to 30 s.
var latencyBuckets = []float64{.001, .0025, .005, .01, .02, .04, .08, .15, .3, .6, 1.2, 2.5, 5, 10, 30}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		phase: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "airlock_execution_phase_seconds", Buckets: latencyBuckets,
			Help: "Time of each phase of an execution (acquire, hand_in, run, collect, destroy) by how its sandbox was obtained (pool, restore, cold).",
		}, []string{"phase", "start"}),
		executions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "airlock_executions_total",
			Help: "Executions (one-shot runs, session execs and cells) by language, sandbox start and status.",
		}, []string{"language", "start", "status"}),
	}
	reg.MustRegister(m.phase, m.executions)
	return m
}
