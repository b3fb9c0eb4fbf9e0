package manager

import "github.com/prometheus/client_golang/prometheus"

// metrics are the manager's Prometheus series.
type metrics struct {
	phase          *prometheus.HistogramVec
	executions     *prometheus.CounterVec
	poolHits       *prometheus.CounterVec
	poolMisses     *prometheus.CounterVec
	poolSize       *prometheus.GaugeVec
	poolMemory     prometheus.Gauge
	poolReady      *prometheus.HistogramVec
	snapshotBuilds *prometheus.CounterVec
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
			Help: "Executions by language, sandbox start and status.",
		}, []string{"language", "start", "status"}),
		poolHits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "airlock_pool_hits_total", Help: "Requests served by a ready pool member.",
		}, []string{"image", "language"}),
		poolMisses: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "airlock_pool_misses_total", Help: "Requests that found the pool empty.",
		}, []string{"image", "language"}),
		poolSize: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "airlock_pool_size", Help: "Ready pool members.",
		}, []string{"image", "language"}),
		poolMemory: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "airlock_pool_memory_bytes", Help: "Memory of all ready pool members, as measured by their cgroups.",
		}),
		poolReady: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "airlock_pool_ready_seconds", Buckets: latencyBuckets,
			Help: "Time to ready a pool member, by source (restore from the base snapshot, or cold boot).",
		}, []string{"image", "language", "source"}),
		snapshotBuilds: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "airlock_snapshot_builds_total", Help: "Base snapshot builds by result (built, failed, discarded).",
		}, []string{"result"}),
	}
	reg.MustRegister(m.phase, m.executions, m.poolHits, m.poolMisses, m.poolSize, m.poolMemory, m.poolReady, m.snapshotBuilds)
	return m
}
