package fleet_test

import (
	"context"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/airlockhq/airlock/fleet"
)

// BenchmarkPlacement measures placement through etcd with three nodes
// placing at once on a three-member embedded cluster: each of b.N rounds
// is one placement (read, score, reserve by transaction) and its release
// on every node concurrently. It reports the placement latency's p50 and
// p99 (the release is not timed).
//
//	go test -run '^$' -bench Placement -benchtime 300x ./fleet/
func BenchmarkPlacement(b *testing.B) {
	caps := fleet.Capacity{CPUMilli: 1 << 30, MemoryMiB: 1 << 30, Sessions: 1 << 20, Runs: 1 << 20}
	_, _, nodes := fleetOf(b, 3, opts{capacity: caps})
	var mu sync.Mutex
	var lat []time.Duration
	ctx := context.Background()
	b.ResetTimer()
	var wg sync.WaitGroup
	for _, n := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			mine := make([]time.Duration, 0, b.N)
			for i := 0; i < b.N; i++ {
				start := time.Now()
				r, _, err := n.f.Place(ctx, fleet.Request{Kind: fleet.KindRun})
				mine = append(mine, time.Since(start))
				if err != nil {
					b.Error(err)
					return
				}
				n.f.Release(ctx, r)
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	b.StopTimer()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	if len(lat) == 0 {
		return
	}
	pct := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) / 1000 }
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
	b.ReportMetric(float64(len(lat)), "placements")
}
