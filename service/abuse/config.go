package abuse

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/airlockhq/airlock"
)

// Response is what the monitor does when a detector fires.
type Response string

const (
	// ResponseKill kills the sandbox (the default).
	ResponseKill Response = "kill"
	// ResponseQuarantine kills the sandbox and quarantines its tenant:
	// new runs and sessions are refused until an operator lifts it.
	ResponseQuarantine Response = "quarantine"
	// ResponseRecord only records the event.
	ResponseRecord Response = "record"
)

// Mining finds a sandbox that keeps its CPU quota busy and prints nothing,
// or talks to a mining pool.
type Mining struct {
	// Window is how long the CPU must stay busy with no output (45 s:
	// long enough that a silent data job of half a minute is not taken
	// for a miner, short enough to decide within the 60 s bound).
	Window time.Duration
	// CPUFraction is the share of the sandbox's CPU quota that counts as
	// busy (0.75: a spinner on a contended host gets less than all of it).
	CPUFraction float64
	// Pools are names of mining pools added to the built-in list
	// (DefaultPools); a name matches itself and every name under it.
	Pools []string
	// NoBuiltinPools leaves the built-in list out.
	NoBuiltinPools bool
}

// Scanning finds a sandbox that is refused many distinct destinations.
type Scanning struct {
	Window   time.Duration // 10 s
	Distinct int           // distinct address:port pairs denied within Window (20)
}

// ForkBomb finds a sandbox that forks up to its limit.
type ForkBomb struct {
	Window time.Duration // 10 s
	// LimitHits is how many samples within Window must see forks refused
	// at the host's process limit (3).
	LimitHits int
	// BurstFraction: the host tasks of the sandbox grow by at least this
	// share of its process limit within Window (0.5).
	BurstFraction float64
}

// DNSTunnel counts the queries the resolver flagged (long labels, high
// entropy) per sandbox.
type DNSTunnel struct {
	Window  time.Duration // 30 s
	Flagged int           // flagged queries within Window (10)
}

// Config configures a Monitor.
type Config struct {
	// Store records events and quarantines; required.
	Store airlock.AbuseStore
	// Interval is how often the cgroup statistics are read (1 s).
	Interval time.Duration
	// Response to a detection (ResponseKill).
	Response Response
	// Disabled lists detectors that do not run.
	Disabled []string

	Mining    Mining
	Scanning  Scanning
	ForkBomb  ForkBomb
	DNSTunnel DNSTunnel

	// Metrics registers airlock_abuse_events_total; nil keeps it in a
	// private registry.
	Metrics prometheus.Registerer
	Logger  *slog.Logger
	Now     func() time.Time
}

// Validate fills defaults and checks the config.
func (c *Config) Validate() error {
	if c.Store == nil {
		return errors.New("abuse: a store is required")
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&c.Interval, time.Second)
	def(&c.Mining.Window, 45*time.Second)
	def(&c.Scanning.Window, 10*time.Second)
	def(&c.ForkBomb.Window, 10*time.Second)
	def(&c.DNSTunnel.Window, 30*time.Second)
	if c.Mining.CPUFraction <= 0 {
		c.Mining.CPUFraction = 0.75
	}
	if c.Scanning.Distinct <= 0 {
		c.Scanning.Distinct = 20
	}
	if c.ForkBomb.LimitHits <= 0 {
		c.ForkBomb.LimitHits = 3
	}
	if c.ForkBomb.BurstFraction <= 0 {
		c.ForkBomb.BurstFraction = 0.5
	}
	if c.DNSTunnel.Flagged <= 0 {
		c.DNSTunnel.Flagged = 10
	}
	switch {
	case c.Mining.CPUFraction > 1:
		return fmt.Errorf("abuse: mining CPU fraction %v is above 1", c.Mining.CPUFraction)
	case c.ForkBomb.BurstFraction > 1:
		return fmt.Errorf("abuse: fork-bomb burst fraction %v is above 1", c.ForkBomb.BurstFraction)
	}
	switch c.Response {
	case "":
		c.Response = ResponseKill
	case ResponseKill, ResponseQuarantine, ResponseRecord:
	default:
		return fmt.Errorf("abuse: unknown response %q (kill, quarantine or record)", c.Response)
	}
	for _, d := range c.Disabled {
		if !known(d) {
			return fmt.Errorf("abuse: unknown detector %q (one of %v)", d, airlock.Detectors)
		}
	}
	for _, p := range c.Mining.Pools {
		if _, ok := airlock.NormalizeHost(p); !ok {
			return fmt.Errorf("abuse: %q is not a host name", p)
		}
	}
	if c.Metrics == nil {
		c.Metrics = prometheus.NewRegistry()
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return nil
}

func known(d string) bool {
	for _, x := range airlock.Detectors {
		if x == d {
			return true
		}
	}
	return false
}
