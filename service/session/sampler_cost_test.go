package session_test

import (
	"context"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/service/session"
)

// The sampler's host CPU with 10 running sessions: rounds of sampling
// (cgroup reads, statfs, the store write of each sample) timed by the
// process's own CPU time. Run with AIRLOCK_MEASURE=1 (it makes 10
// sessions); it fails if one round costs more than 1% of a core at the
// default 5 s interval (50 ms).
func TestSamplerCost(t *testing.T) {
	if os.Getenv("AIRLOCK_MEASURE") == "" {
		t.Skip("set AIRLOCK_MEASURE=1 to measure the sampler's CPU with 10 sessions")
	}
	s := newStack(t, func(c *session.Config) { c.SampleInterval = time.Hour })
	var ids []string
	for i := range 10 {
		tc := s.a
		if i%2 == 1 {
			tc = s.b
		}
		ids = append(ids, s.create(tc, airlock.CreateSessionRequest{}).ID)
	}
	cpu := func() time.Duration {
		var ru syscall.Rusage
		syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	const rounds = 200
	ctx := context.Background()
	s.mgr.SampleRounds(ctx, 5) // warm up
	c0, w0 := cpu(), time.Now()
	s.mgr.SampleRounds(ctx, rounds)
	perRound, wall := (cpu()-c0)/rounds, time.Since(w0)/rounds
	t.Logf("10 sessions: %s CPU and %s wall per round; at a 5 s interval %.3f%% of one core", perRound, wall, 100*perRound.Seconds()/5)
	if perRound > 50*time.Millisecond {
		t.Errorf("one round of sampling 10 sessions cost %s of CPU", perRound)
	}
	for i, id := range ids {
		tc := s.a
		if i%2 == 1 {
			tc = s.b
		}
		tc.c.DeleteSession(ctxFor(t, time.Minute), id)
	}
	s.checkClean()
}
