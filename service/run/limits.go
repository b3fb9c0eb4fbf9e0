package run

import (
	"context"
	"syscall"

	"github.com/airlockhq/airlock"
)

// Which limit ended a run, and which it ran into: one place for one-shot
// runs, session execs and cells.
//
//   - abuse:<detector>: the watchdog killed the sandbox (it says so);
//   - wall_time: the agent or the host killed the program at its
//     timeout;
//   - memory: the sandbox's memory cgroup OOM-killed it (the host's
//     count of OOM kills); reached (LimitsHit) also when the host cgroup
//     counted its usage at the limit during the run (gVisor's kernel
//     then kills a process inside rather than the sandbox dying);
//   - processes: the host's pids cgroup refused forks during the run
//     (its max events went up);
//   - disk: the workspace's file system (a loop disk of its own, sized
//     to the limit) has next to no room left after the run;
//   - egress_bytes: the sandbox's network has used its byte budget (the
//     proxy cut its connections);
//   - output: a stream passed its cap and the rest was dropped.
//
// EndedBy is the first of abuse, wall_time and memory that holds; the
// others are limits a program survives, listed in LimitsHit with those.

// diskFullBytes is the free space under which a workspace counts as full.
const diskFullBytes = 1 << 20

// counted makes both captures report their output to the watchdog.
func (r *Runner) counted(sb airlock.Sandbox, stdout, stderr *capture) {
	id := sb.ID()
	count := func(n int) { r.cfg.Watchdog.Output(id, n) }
	stdout.count, stderr.count = count, count
}

// readStats reads the sandbox's stats at the start of a run (zero if
// they cannot be read).
func readStats(ctx context.Context, sb airlock.Sandbox) airlock.Stats {
	st, _ := sb.Stats(ctx)
	return st
}

// classify sets e.EndedBy and e.LimitsHit from the run's outcome (set on
// e already), the stats before and after and the sandbox.
func (r *Runner) classify(e *airlock.Execution, sb airlock.Sandbox, before, after airlock.Stats, afterErr error, lim airlock.Limits) {
	var hit []string
	switch {
	case r.cfg.Watchdog.KilledBy(sb.ID()) != "":
		e.EndedBy = r.cfg.Watchdog.KilledBy(sb.ID())
	case e.TimedOut:
		e.EndedBy = airlock.LimitWallTime
	case e.OOMKilled && e.ExitCode != 0:
		e.EndedBy = airlock.LimitMemory
	}
	if e.TimedOut {
		hit = append(hit, airlock.LimitWallTime)
	}
	if e.OOMKilled || afterErr == nil && after.MemoryLimitHits > before.MemoryLimitHits {
		hit = append(hit, airlock.LimitMemory)
	}
	if afterErr == nil && after.PidsLimitHits > before.PidsLimitHits {
		hit = append(hit, airlock.LimitProcesses)
	}
	if diskFull(sb.WorkspaceDir()) {
		hit = append(hit, airlock.LimitDisk)
	}
	if airlock.NetworkOverQuota(sb) {
		hit = append(hit, airlock.LimitEgressBytes)
	}
	if e.StdoutTruncated || e.StderrTruncated {
		hit = append(hit, airlock.LimitOutput)
	}
	e.LimitsHit = hit
}

// diskFull reports whether the file system of dir has less than
// diskFullBytes free.
func diskFull(dir string) bool {
	if dir == "" {
		return false
	}
	var fs syscall.Statfs_t
	if err := syscall.Statfs(dir, &fs); err != nil {
		return false
	}
	return int64(fs.Bavail)*int64(fs.Bsize) < diskFullBytes
}
