package run

import "github.com/prometheus/client_golang/prometheus"

// metrics are the runner's Prometheus series.
type metrics struct {
	phase      *prometheus.HistogramVec
	executions *prometheus.CounterVec
	// guardFindings counts findings by rule and action (reported: the
	// code ran; blocked: it was refused); guardSeconds times the checks.
	guardFindings *prometheus.CounterVec
	guardSeconds  *prometheus.HistogramVec
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
	m.guardFindings = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "airlock_guard_findings_total",
		Help: "Findings of the guard by rule and action (reported: the code ran; blocked: refused under the block policy).",
	}, []string{"rule", "action"})
	m.guardSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "airlock_guard_check_seconds", Buckets: latencyBuckets,
		Help: "Time the guard took to check code before it ran, by language.",
	}, []string{"language"})
	reg.MustRegister(m.phase, m.executions, m.guardFindings, m.guardSeconds)
	return m
}
