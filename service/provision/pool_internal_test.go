package provision

import (
	"testing"
	"time"

	"github.com/airlockhq/airlock"
)

func TestArrivalRateFollowsARamp(t *testing.T) {
	now := time.Now()
	every := func(n int, gap time.Duration) []time.Time {
		var a []time.Time
		for i := n; i > 0; i-- {
			a = append(a, now.Add(-time.Duration(i)*gap))
		}
		return a
	}
	window := 30 * time.Second
	for _, c := range []struct {
		name     string
		arrivals []time.Time
		want     float64
	}{
		{"none", nil, 0},
		// Steady 2/s over the whole window: both windows agree.
		{"steady", every(60, 500*time.Millisecond), 2},
		// 2/s for the last 5 s only: the long window alone says 0.33/s.
		{"ramp", every(10, 500*time.Millisecond), 2},
		// A burst 20 s ago and nothing since: the long window keeps it.
		{"lull", []time.Time{now.Add(-21 * time.Second), now.Add(-20 * time.Second), now.Add(-19 * time.Second)}, 0.1},
	} {
		got := arrivalRate(c.arrivals, now, window)
		if got < c.want*0.99 || got > c.want*1.01 {
			t.Errorf("%s: rate %.3f/s, want %.3f/s", c.name, got, c.want)
		}
	}
}

func TestBehindMakesPlainMembersOnlyOfBootedRuntimes(t *testing.T) {
	p := newPool(nil, PoolConfig{})
	now := time.Now()
	booted := Recipe{Runtime: "python", Preload: []string{"json"}}
	restored := Recipe{Runtime: "python", Restore: true}
	for _, c := range []struct {
		name     string
		recipe   Recipe
		waiters  int
		lastMiss time.Duration // ago; 0 for never
		want     bool
	}{
		{"idle", booted, 0, 0, false},
		{"waiters", booted, 1, 0, true},
		{"recent miss", booted, 0, time.Second, true},
		{"old miss", booted, 0, 2 * behindFor, false},
		{"restored runtime", restored, 2, time.Second, false},
		{"no runtime", Recipe{}, 2, time.Second, false},
	} {
		e := &poolEntry{key: warmKey{recipe: c.recipe}}
		for i := 0; i < c.waiters; i++ {
			e.waiters = append(e.waiters, make(chan airlock.Sandbox, 1))
		}
		if c.lastMiss > 0 {
			e.lastMiss = now.Add(-c.lastMiss)
		}
		if got := p.behind(e, now); got != c.want {
			t.Errorf("%s: behind = %v, want %v", c.name, got, c.want)
		}
	}
}
