package main

import (
	"flag"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/service/abuse"
)

// abuseOptions are the flags of the abuse monitor.
type abuseOptions struct {
	off         bool
	response    string
	pools       string
	disable     string
	interval    time.Duration
	miningWin   time.Duration
	cpuFraction float64
	scanWin     time.Duration
	scanDistict int
	forkWin     time.Duration
	forkHits    int
	forkBurst   float64
	dnsWin      time.Duration
	dnsFlagged  int
}

func (o *abuseOptions) register(fs *flag.FlagSet) {
	fs.BoolVar(&o.off, "no-abuse", false, "run no abuse detectors")
	fs.StringVar(&o.response, "abuse-response", "kill", "what a detection does: kill (the sandbox), quarantine (kill, and refuse the tenant new runs and sessions until `airlock tenant unquarantine`) or record")
	fs.StringVar(&o.pools, "abuse-pools", "", "mining pool domains added to the built-in list (comma-separated)")
	fs.StringVar(&o.disable, "abuse-disable", "", "detectors that do not run (comma-separated: mining, scanning, fork-bomb, dns-tunnel)")
	fs.DurationVar(&o.interval, "abuse-interval", time.Second, "how often each sandbox's cgroup statistics are read")
	fs.DurationVar(&o.miningWin, "abuse-mining-window", 45*time.Second, "mining: how long the CPU stays busy with no output")
	fs.Float64Var(&o.cpuFraction, "abuse-cpu-fraction", 0.75, "mining: share of the sandbox's CPU quota that counts as busy")
	fs.DurationVar(&o.scanWin, "abuse-scan-window", 10*time.Second, "scanning: the window the refused destinations are counted in")
	fs.IntVar(&o.scanDistict, "abuse-scan-distinct", 20, "scanning: distinct destinations refused within the window")
	fs.DurationVar(&o.forkWin, "abuse-fork-window", 10*time.Second, "fork bombs: the window")
	fs.IntVar(&o.forkHits, "abuse-fork-hits", 3, "fork bombs: samples within the window that see forks refused at the limit")
	fs.Float64Var(&o.forkBurst, "abuse-fork-burst", 0.5, "fork bombs: growth of the sandbox's tasks within the window, as a share of its process limit")
	fs.DurationVar(&o.dnsWin, "abuse-dns-window", 30*time.Second, "DNS tunnelling: the window")
	fs.IntVar(&o.dnsFlagged, "abuse-dns-flagged", 10, "DNS tunnelling: queries the resolver flagged within the window")
}

// startAbuse starts the abuse monitor; nil with --no-abuse.
func startAbuse(o abuseOptions, store airlock.AbuseStore, reg prometheus.Registerer, logger *slog.Logger) (*abuse.Monitor, error) {
	if o.off {
		return nil, nil
	}
	return abuse.New(abuse.Config{
		Store:     store,
		Interval:  o.interval,
		Response:  abuse.Response(o.response),
		Disabled:  splitList(o.disable),
		Mining:    abuse.Mining{Window: o.miningWin, CPUFraction: o.cpuFraction, Pools: splitList(o.pools)},
		Scanning:  abuse.Scanning{Window: o.scanWin, Distinct: o.scanDistict},
		ForkBomb:  abuse.ForkBomb{Window: o.forkWin, LimitHits: o.forkHits, BurstFraction: o.forkBurst},
		DNSTunnel: abuse.DNSTunnel{Window: o.dnsWin, Flagged: o.dnsFlagged},
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
