package node

import (
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/service/abuse"
)

// AbuseConfig are the settings of the abuse monitor.
type AbuseConfig struct {
	Off         bool     // run no detectors
	Response    string   // kill, quarantine or record
	Pools       []string // mining pool domains added to the built-in list
	Disable     []string // detectors that do not run
	Interval    time.Duration
	MiningWin   time.Duration
	CPUFraction float64
	ScanWin     time.Duration
	ScanDistict int
	ForkWin     time.Duration
	ForkHits    int
	ForkBurst   float64
	DNSWin      time.Duration
	DNSFlagged  int
}

// startAbuse starts the abuse monitor; nil with --no-abuse.
func startAbuse(o AbuseConfig, store airlock.AbuseStore, reg prometheus.Registerer, logger *slog.Logger) (*abuse.Monitor, error) {
	if o.Off {
		return nil, nil
	}
	return abuse.New(abuse.Config{
		Store:     store,
		Interval:  o.Interval,
		Response:  abuse.Response(o.Response),
		Disabled:  o.Disable,
		Mining:    abuse.Mining{Window: o.MiningWin, CPUFraction: o.CPUFraction, Pools: o.Pools},
		Scanning:  abuse.Scanning{Window: o.ScanWin, Distinct: o.ScanDistict},
		ForkBomb:  abuse.ForkBomb{Window: o.ForkWin, LimitHits: o.ForkHits, BurstFraction: o.ForkBurst},
		DNSTunnel: abuse.DNSTunnel{Window: o.DNSWin, Flagged: o.DNSFlagged},
		Metrics:   reg,
		Logger:    logger,
	})
}

// watchdogOf is the monitor as the runner sees it.
func watchdogOf(m *abuse.Monitor) airlock.Watchdog {
	if m == nil {
		return airlock.NoWatchdog{}
	}
	return m
}

// egressStoreOf is the store the egress log is written to: through the
// monitor when it runs.
func egressStoreOf(m *abuse.Monitor, store airlock.EgressStore) airlock.EgressStore {
	if m == nil {
		return store
	}
	return m.EgressStore(store)
}
