package abuse

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/airlockhq/airlock"
)

// sample is one reading of a sandbox's cgroup statistics.
type sample struct {
	at   time.Time
	cpu  time.Duration
	pids int64
	hits int64 // forks refused at the limit, so far
	wait time.Duration
}

// watched is what the detectors keep about one sandbox.
type watched struct {
	w          airlock.Watched
	refs       int
	started    time.Time
	lastOutput time.Time
	samples    []sample
	denied     []dest      // denied connections, oldest first
	flagged    []time.Time // flagged DNS queries, oldest first
	fired      bool
}

type dest struct {
	at  time.Time
	key string // address:port
}

// finding is a detector's decision.
type finding struct {
	detector string
	summary  string
	evidence map[string]any
}

// keep bounds the samples kept: the longest window at one a second, and
// some.
const keep = 600

func newWatched(w airlock.Watched, now time.Time) *watched {
	return &watched{w: w, started: now}
}

func (x *watched) add(s sample) {
	x.samples = append(x.samples, s)
	if len(x.samples) > keep {
		x.samples = append(x.samples[:0], x.samples[len(x.samples)-keep/2:]...)
	}
}

// at returns the newest sample taken at or before t, and whether there
// is one.
func (x *watched) at(t time.Time) (sample, bool) {
	i := sort.Search(len(x.samples), func(i int) bool { return x.samples[i].at.After(t) })
	if i == 0 {
		return sample{}, false
	}
	return x.samples[i-1], true
}

// mining: over the last Window the sandbox's demand for CPU (what it
// used, plus what its threads waited for on a busy host) was at least
// CPUFraction of its CPU quota, and it printed nothing.
func (x *watched) mining(now time.Time, c Mining) *finding {
	if len(x.samples) < 2 || x.w.Limits.CPUs <= 0 {
		return nil
	}
	last := x.samples[len(x.samples)-1]
	first, ok := x.at(now.Add(-c.Window))
	if !ok || !x.lastOutput.Before(first.at) && !x.lastOutput.IsZero() {
		return nil
	}
	elapsed := last.at.Sub(first.at)
	if elapsed < c.Window*9/10 {
		return nil
	}
	// What it used, and what it waited for on a busy host: the demand.
	// (A sandbox cannot be owed more than its quota: the demand is
	// capped there.)
	used := last.cpu - first.cpu
	quota := elapsed.Seconds() * x.w.Limits.CPUs
	frac := min((used+max(last.wait-first.wait, 0)).Seconds(), quota) / quota
	if frac < c.CPUFraction {
		return nil
	}
	return &finding{
		detector: airlock.DetectorMining,
		summary: fmt.Sprintf("CPU at %.0f%% of its %.3g vCPU quota for %.0f s with no output",
			frac*100, x.w.Limits.CPUs, elapsed.Seconds()),
		evidence: map[string]any{
			"rule": "cpu-without-output", "cpu_fraction": round(frac), "threshold": c.CPUFraction,
			"window_s": round(elapsed.Seconds()), "vcpus": x.w.Limits.CPUs, "cpu_s": round(used.Seconds()),
			"cpu_wait_s": round(max(last.wait-first.wait, 0).Seconds()),
		},
	}
}

// pool: a query or a connection for a known mining pool, or a
// connection that opened with a stratum request.
func (x *watched) pool(ev *airlock.EgressEvent, p pools) *finding {
	if ev.Kind != airlock.EgressDNS && ev.Kind != airlock.EgressConnection {
		return nil
	}
	for _, f := range ev.Flags {
		if f == "stratum" {
			return &finding{
				detector: airlock.DetectorMining,
				summary:  fmt.Sprintf("a connection to port %d opened with a mining pool's stratum request", ev.Port),
				evidence: map[string]any{"rule": "stratum", "port": ev.Port, "verdict": ev.Verdict, "kind": ev.Kind},
			}
		}
	}
	for _, name := range []string{ev.Name, ev.SNI, hostOnly(ev.Host)} {
		if entry := p.match(name); entry != "" {
			what := "a DNS query"
			if ev.Kind == airlock.EgressConnection {
				what = "a connection"
			}
			return &finding{
				detector: airlock.DetectorMining,
				summary:  fmt.Sprintf("%s for a name under the mining pool %s", what, entry),
				evidence: map[string]any{"rule": "pool-name", "pool": entry, "kind": ev.Kind, "verdict": ev.Verdict},
			}
		}
	}
	return nil
}

func hostOnly(h string) string {
	if i := strings.LastIndexByte(h, ':'); i >= 0 {
		if _, err := strconv.Atoi(h[i+1:]); err == nil {
			return h[:i]
		}
	}
	return h
}

// scanning: at least Distinct distinct destinations refused within
// Window.
func (x *watched) scanning(ev *airlock.EgressEvent, at time.Time, c Scanning) *finding {
	if ev.Kind != airlock.EgressConnection || ev.Verdict != airlock.VerdictDenied {
		return nil
	}
	key := ev.Dialled
	if key == "" {
		key = ev.Name + ":" + strconv.Itoa(ev.Port)
	}
	x.denied = append(x.denied, dest{at: at, key: key})
	cut := at.Add(-c.Window)
	i := 0
	for i < len(x.denied) && x.denied[i].at.Before(cut) {
		i++
	}
	x.denied = x.denied[i:]
	if len(x.denied) > 4*c.Distinct+64 {
		x.denied = x.denied[len(x.denied)-(4*c.Distinct+64):]
	}
	seen := map[string]bool{}
	addrs, ports := map[string]bool{}, map[string]bool{}
	for _, d := range x.denied {
		seen[d.key] = true
		if a, p, ok := cutPort(d.key); ok {
			addrs[a], ports[p] = true, true
		}
	}
	if len(seen) < c.Distinct {
		return nil
	}
	span := x.denied[len(x.denied)-1].at.Sub(x.denied[0].at)
	return &finding{
		detector: airlock.DetectorScanning,
		summary:  fmt.Sprintf("%d distinct destinations refused within %.0f s", len(seen), span.Seconds()),
		evidence: map[string]any{
			"distinct_destinations": len(seen), "distinct_addresses": len(addrs), "distinct_ports": len(ports),
			"threshold": c.Distinct, "window_s": round(c.Window.Seconds()), "span_s": round(span.Seconds()),
		},
	}
}

func cutPort(s string) (string, string, bool) {
	i := strings.LastIndexByte(s, ':')
	if i < 0 {
		return "", "", false
	}
	return s[:i], s[i+1:], true
}

// forkBomb: forks refused at the host's process limit in LimitHits
// samples within Window, or the host tasks grown by BurstFraction of the
// process limit within Window.
func (x *watched) forkBomb(now time.Time, c ForkBomb) *finding {
	n := len(x.samples)
	if n < 2 {
		return nil
	}
	cut := now.Add(-c.Window)
	hits := 0
	low := x.samples[n-1].pids
	for i := n - 1; i > 0 && !x.samples[i].at.Before(cut); i-- {
		if x.samples[i].hits > x.samples[i-1].hits {
			hits++
		}
		low = min(low, x.samples[i-1].pids)
	}
	last := x.samples[n-1]
	if hits >= c.LimitHits {
		return &finding{
			detector: airlock.DetectorForkBomb,
			summary:  fmt.Sprintf("forks refused at the process limit in %d samples within %.0f s", hits, c.Window.Seconds()),
			evidence: map[string]any{"rule": "limit-reached", "samples_with_refusals": hits, "threshold": c.LimitHits,
				"window_s": round(c.Window.Seconds()), "tasks": last.pids, "pids_limit": x.w.Limits.Pids},
		}
	}
	if x.w.Limits.Pids > 0 {
		burst := int64(c.BurstFraction * float64(x.w.Limits.Pids))
		if grown := last.pids - low; burst > 0 && grown >= burst {
			return &finding{
				detector: airlock.DetectorForkBomb,
				summary:  fmt.Sprintf("%d new tasks within %.0f s (the process limit is %d)", grown, c.Window.Seconds(), x.w.Limits.Pids),
				evidence: map[string]any{"rule": "fork-rate", "new_tasks": grown, "threshold": burst,
					"window_s": round(c.Window.Seconds()), "tasks": last.pids, "pids_limit": x.w.Limits.Pids},
			}
		}
	}
	return nil
}

// dnsTunnel: at least Flagged queries the resolver flagged within Window.
func (x *watched) dnsTunnel(ev *airlock.EgressEvent, at time.Time, c DNSTunnel) *finding {
	if ev.Kind != airlock.EgressDNS || len(ev.Flags) == 0 {
		return nil
	}
	x.flagged = append(x.flagged, at)
	cut := at.Add(-c.Window)
	i := 0
	for i < len(x.flagged) && x.flagged[i].Before(cut) {
		i++
	}
	x.flagged = x.flagged[i:]
	if len(x.flagged) < c.Flagged {
		return nil
	}
	return &finding{
		detector: airlock.DetectorDNSTunnel,
		summary:  fmt.Sprintf("%d DNS queries flagged as tunnelling within %.0f s", len(x.flagged), c.Window.Seconds()),
		evidence: map[string]any{"flagged_queries": len(x.flagged), "threshold": c.Flagged, "window_s": round(c.Window.Seconds()),
			"flags": strings.Join(ev.Flags, ",")},
	}
}
