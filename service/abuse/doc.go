// Package abuse watches the sandboxes of a node for abuse and acts on it
// within seconds: cryptocurrency mining, port scanning, fork bombs and
// DNS tunnelling.
//
// It owns the detectors, their windows and thresholds, the decision and
// the response: an event (airlock.AbuseStore), a Prometheus counter per
// detector, the kill of the sandbox (whose run or session then ends by
// abuse:<detector>, see airlock.Watchdog.KilledBy) and, if configured,
// the quarantine of the tenant. What it reads:
//
//   - the host's cgroup statistics of each watched sandbox (Stats: CPU
//     time, tasks, forks refused at the limit; and, where the sandbox
//     can tell, airlock.CPUWaiter: how long its threads waited for a
//     CPU), sampled every Interval;
//   - the output the runner saw (Output);
//   - the egress audit log as it is written (EgressStore wraps the
//     store the egress proxy and resolver record into): denied
//     connections, the proxy's stratum flag, the names looked up and the
//     resolver's tunnelling flags.
//
// It must not touch what it watches beyond killing it: it makes, reads
// into and destroys no sandbox, and it never records what a sandbox sent
// (evidence is figures and the list entry that matched, never a name a
// sandbox chose, which could carry a wallet or a secret).
package abuse
