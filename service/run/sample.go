package run

import (
	"context"
	"sync"
	"syscall"
	"time"

	"github.com/airlockhq/airlock"
)

// sampleEvery is how often a one-shot run's sandbox is sampled while its
// program runs: often enough that a memory bomb killed within a second
// leaves a sample near its limit, and cheap (a read of the sandbox's
// cgroup and a statfs of its disk).
const sampleEvery = 250 * time.Millisecond

// sampler reads a sandbox's resource use every interval while a program
// runs and keeps the latest reading: the record of a run ended by a
// limit gives it as last_sample, as a session's record does.
type sampler struct {
	sb   airlock.Sandbox
	cpus float64
	stop chan struct{}
	done chan struct{}

	mu      sync.Mutex
	last    *airlock.MetricSample
	markAt  time.Time
	markCPU time.Duration
}

// startSampler starts sampling sb, whose CPU limit is cpus.
func startSampler(sb airlock.Sandbox, cpus float64, every time.Duration) *sampler {
	s := &sampler{sb: sb, cpus: cpus, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		t := time.NewTicker(every)
		defer t.Stop()
		s.read()
		for {
			select {
			case <-s.stop:
				return
			case <-t.C:
				s.read()
			}
		}
	}()
	return s
}

// read takes one sample; a sandbox that cannot be read (it ended) keeps
// the sample before.
func (s *sampler) read() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	st, err := s.sb.Stats(ctx)
	if err != nil || st.OOMKilled {
		return // what is read after the kill is not "before it"
	}
	now := time.Now().UTC()
	m := &airlock.MetricSample{At: now, MemoryBytes: st.MemoryBytes, DiskBytes: diskUsed(s.sb.WorkspaceDir())}
	s.mu.Lock()
	defer s.mu.Unlock()
	if wall := now.Sub(s.markAt); !s.markAt.IsZero() && wall > 0 && s.cpus > 0 && st.CPUTime >= s.markCPU {
		m.CPUPct = min(100, 100*float64(st.CPUTime-s.markCPU)/(float64(wall)*s.cpus))
	}
	s.markAt, s.markCPU = now, st.CPUTime
	s.last = m
}

// Stop stops sampling and returns the latest sample, or nil.
func (s *sampler) Stop() *airlock.MetricSample {
	select {
	case <-s.stop:
	default:
		close(s.stop)
	}
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last
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
