package provision

import "github.com/prometheus/client_golang/prometheus"

// metrics are the provisioner's Prometheus series.
type metrics struct {
	acquire        *prometheus.HistogramVec
	destroy        *prometheus.HistogramVec
	reattach       prometheus.Histogram
	poolHits       *prometheus.CounterVec
	poolMisses     *prometheus.CounterVec
	poolDead       *prometheus.CounterVec
	poolSize       *prometheus.GaugeVec
	poolMemory     prometheus.Gauge
	poolReady      *prometheus.HistogramVec
	snapshotBuilds *prometheus.CounterVec
	readyContexts  prometheus.Counter
}

// latencyBuckets cover 1 ms to 30 s.
var latencyBuckets = []float64{.001, .0025, .005, .01, .02, .04, .08, .15, .3, .6, 1.2, 2.5, 5, 10, 30}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		acquire: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "airlock_sandbox_acquire_seconds", Buckets: latencyBuckets,
			Help: "Time to get a sandbox, by what it is for (one-shot, session) and how it was obtained (pool, restore, cold).",
		}, []string{"kind", "start"}),
		destroy: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "airlock_sandbox_destroy_seconds", Buckets: latencyBuckets,
			Help: "Time to destroy a sandbox, by how it was obtained.",
		}, []string{"start"}),
		reattach: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "airlock_sandbox_reattach_seconds", Buckets: latencyBuckets,
			Help: "Time to reattach the sandbox of a session after a restart.",
		}),
		poolHits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "airlock_pool_hits_total", Help: "Requests served by a ready pool member.",
		}, []string{"image", "language"}),
		poolMisses: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "airlock_pool_misses_total", Help: "Requests that found the pool empty.",
		}, []string{"image", "language"}),
		poolDead: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "airlock_pool_dead_total", Help: "Pool members found dead (their sandbox killed or gone while idle) and destroyed instead of handed out.",
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
			Name: "airlock_snapshot_builds_total", Help: "Base snapshot builds by result (built, failed, discarded, refused: it held a credential).",
		}, []string{"result"}),
		readyContexts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "airlock_ready_contexts_taken_total", Help: "Code contexts a session took ready from its sandbox (started before the session, reseeded) instead of starting an interpreter.",
		}),
	}
	reg.MustRegister(m.acquire, m.destroy, m.reattach, m.poolHits, m.poolMisses, m.poolDead, m.poolSize, m.poolMemory, m.poolReady, m.snapshotBuilds, m.readyContexts)
	return m
}
