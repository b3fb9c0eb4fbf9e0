package session

import (
	"context"
	"syscall"
	"time"

	"github.com/airlockhq/airlock"
)

// Metrics: every SampleInterval the sampler reads, from the host, the
// resource use of each session whose sandbox runs (ready or busy) and
// records one sample in the metrics store: its cgroup's CPU time (as a
// share of the session's CPU limit since the previous sample) and
// memory, the used space of its disk (one statfs) and the counters of its
// network link. Samples outlive their session by SampleRetention.

// netCounter is implemented by network attachments that can count the
// bytes the sandbox received and sent on its link.
type netCounter interface {
	NetCounters() (rxBytes, txBytes int64, err error)
}

var _ airlock.SessionMetricsService = (*Manager)(nil)

// cpuMark is a session's CPU time at its previous sample.
type cpuMark struct {
	at  time.Time
	cpu time.Duration
}

// sampler runs the sampling loop until the manager stops.
func (m *Manager) sampler() {
	defer m.wg.Done()
	t := time.NewTicker(m.cfg.SampleInterval)
	defer t.Stop()
	marks := map[string]cpuMark{}
	var pruned time.Time
	for {
		select {
		case <-m.stop:
			return
		case <-t.C:
		}
		m.sampleAll(context.Background(), marks)
		if now := m.cfg.Now(); now.Sub(pruned) >= samplePruneEvery {
			pruned = now
			m.pruneSamples(context.Background(), now)
		}
	}
}

// samplePruneEvery is how often samples past their retention are deleted.
const samplePruneEvery = 10 * time.Minute

// pruneSamples deletes the samples of sessions that ended more than
// SampleRetention ago.
func (m *Manager) pruneSamples(ctx context.Context, now time.Time) {
	n, err := m.cfg.Metrics.DeleteSessionSamplesBefore(ctx, now.Add(-m.cfg.SampleRetention))
	if err != nil {
		m.cfg.Logger.Error("prune session samples", "err", err)
	} else if n > 0 {
		m.cfg.Logger.Debug("pruned session samples", "count", n)
	}
}

// sampleAll takes one sample of every running session; marks carries
// each one's CPU time from the previous round (sessions gone are dropped
// from it).
func (m *Manager) sampleAll(ctx context.Context, marks map[string]cpuMark) {
	m.mu.Lock()
	all := make([]*live, 0, len(m.live))
	for _, l := range m.live {
		all = append(all, l)
	}
	m.mu.Unlock()
	seen := make(map[string]bool, len(all))
	for _, l := range all {
		l.mu.Lock()
		id, tenant, state, sb := l.rec.ID, l.rec.TenantID, l.rec.State, l.sb()
		cpus, created := l.rec.Limits.CPUs, l.rec.CreatedAt
		skip := l.pausing || sb == nil || (state != airlock.SessionReady && state != airlock.SessionBusy)
		l.mu.Unlock()
		if skip {
			continue
		}
		seen[id] = true
		mark, ok := marks[id]
		if !ok {
			mark = cpuMark{at: created}
		}
		s, cpu, err := m.sample(ctx, sb, cpus, mark)
		if err != nil {
			continue // the sandbox is going away; its end is recorded elsewhere
		}
		marks[id] = cpuMark{at: s.At, cpu: cpu}
		if err := m.cfg.Metrics.AddSessionSample(ctx, tenant, id, s); err != nil {
			m.cfg.Logger.Warn("record a session sample", "session", id, "err", err)
		}
	}
	for id := range marks {
		if !seen[id] {
			delete(marks, id)
		}
	}
}

// sample reads one sample of sb: CPU in percent of cpus since mark, at
// most 100, and the CPU time now.
func (m *Manager) sample(ctx context.Context, sb airlock.Sandbox, cpus float64, mark cpuMark) (airlock.MetricSample, time.Duration, error) {
	st, err := sb.Stats(ctx)
	if err != nil {
		return airlock.MetricSample{}, 0, err
	}
	now := m.cfg.Now().UTC()
	s := airlock.MetricSample{At: now, MemoryBytes: st.MemoryBytes, DiskBytes: diskUsed(sb.WorkspaceDir())}
	if wall := now.Sub(mark.at); wall > 0 && cpus > 0 && st.CPUTime >= mark.cpu {
		s.CPUPct = min(100, 100*float64(st.CPUTime-mark.cpu)/(float64(wall)*cpus))
	}
	if att := networkOf(sb); att != nil {
		if nc, ok := att.(netCounter); ok {
			if rx, tx, err := nc.NetCounters(); err == nil {
				s.NetRxBytes, s.NetTxBytes = rx, tx
			}
		}
	}
	return s, st.CPUTime, nil
}

// diskUsed is the space used on the file system of dir (the sandbox's
// own disk), 0 if it cannot be read.
func diskUsed(dir string) int64 {
	if dir == "" {
		return 0
	}
	var fs syscall.Statfs_t
	if err := syscall.Statfs(dir, &fs); err != nil {
		return 0
	}
	return int64(fs.Blocks-fs.Bfree) * int64(fs.Bsize)
}

// SessionMetrics returns the samples of a tenant's session, live or
// ended, oldest first. Another tenant's session is not found.
func (m *Manager) SessionMetrics(ctx context.Context, tenant *airlock.Tenant, id string, f airlock.MetricsFilter) (*airlock.SessionMetrics, error) {
	if m.cfg.Metrics == nil {
		return nil, airlock.Problem(airlock.ENOTIMPLEMENTED, "metrics-unavailable", "this server keeps no session metrics")
	}
	if !f.Start.IsZero() && !f.End.IsZero() && f.End.Before(f.Start) {
		return nil, airlock.Errorf(airlock.EINVALID, "end (%s) is before start (%s)", f.End.Format(time.RFC3339), f.Start.Format(time.RFC3339))
	}
	if _, err := m.Session(ctx, tenant, id); err != nil {
		return nil, err
	}
	f.TenantID, f.SessionID = tenant.ID, id
	samples, err := m.cfg.Metrics.SessionSamples(ctx, f)
	if err != nil {
		return nil, err
	}
	return &airlock.SessionMetrics{Samples: samples}, nil
}

// lastSample returns the newest sample of a session taken at or before
// t, or nil.
func (m *Manager) lastSample(ctx context.Context, tenantID, id string, t time.Time) *airlock.MetricSample {
	if m.cfg.Metrics == nil {
		return nil
	}
	// Sampling stops when the session starts to end (destroying), which
	// may take a while: look back a minute beyond two intervals.
	start := t.Add(-2*m.cfg.SampleInterval - time.Minute)
	ss, err := m.cfg.Metrics.SessionSamples(ctx, airlock.MetricsFilter{TenantID: tenantID, SessionID: id, Start: start, End: t})
	if err != nil || len(ss) == 0 {
		return nil
	}
	s := ss[len(ss)-1]
	return &s
}

// endFacts fills what an ended session's record says of its end beyond
// the reason: the limit it ran into and its last sample before the end.
func (m *Manager) endFacts(ctx context.Context, s *airlock.Session) {
	if s.EndedAt == nil {
		return
	}
	s.EndLimit = airlock.SessionLimitOf(s.EndReason)
	s.LastSample = m.lastSample(ctx, s.TenantID, s.ID, *s.EndedAt)
}
