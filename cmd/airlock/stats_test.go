package main

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// Nearest rank: the p-th percentile of n sorted values is the value at
// 1-based rank ceil(p/100 * n), at least 1. Each expectation below is
// worked out by hand from that rule.
func TestPercentile(t *testing.T) {
	// d turns small integers into durations so the tables read as numbers.
	d := func(vs ...int) []time.Duration {
		out := make([]time.Duration, len(vs))
		for i, v := range vs {
			out[i] = time.Duration(v)
		}
		return out
	}
	oneToN := func(n int) []time.Duration {
		vs := make([]int, n)
		for i := range vs {
			vs[i] = i + 1
		}
		return d(vs...)
	}
	tests := []struct {
		name   string
		sorted []time.Duration
		p      float64
		want   time.Duration
	}{
		// Five values 15 20 35 40 50 (the textbook example).
		{"5 values p5", d(15, 20, 35, 40, 50), 5, 15},     // ceil(0.25) = 1 -> 15
		{"5 values p30", d(15, 20, 35, 40, 50), 30, 20},   // ceil(1.5) = 2 -> 20
		{"5 values p40", d(15, 20, 35, 40, 50), 40, 20},   // 0.40*5 = 2 exactly -> rank 2 -> 20
		{"5 values p50", d(15, 20, 35, 40, 50), 50, 35},   // ceil(2.5) = 3 -> 35
		{"5 values p100", d(15, 20, 35, 40, 50), 100, 50}, // rank 5 -> 50
		{"5 values p0", d(15, 20, 35, 40, 50), 0, 15},     // rank 0, raised to 1 -> 15
		// 1..10: the value equals its rank.
		{"1..10 p50", oneToN(10), 50, 5},  // 0.5*10 = 5 -> 5
		{"1..10 p95", oneToN(10), 95, 10}, // ceil(9.5) = 10 -> 10
		{"1..10 p99", oneToN(10), 99, 10}, // ceil(9.9) = 10 -> 10
		{"1..10 p91", oneToN(10), 91, 10}, // ceil(9.1) = 10 -> 10
		{"1..10 p90", oneToN(10), 90, 9},  // 0.9*10 = 9 exactly -> 9
		// 1..20 at p95: 0.95*20 = 19 exactly -> 19.
		{"1..20 p95", oneToN(20), 95, 19},
		// 1..100: the p-th percentile of 1..100 is p. p7 and p55 catch
		// float error: (7/100)*100 computes as 7.000000000000001, whose
		// ceiling would wrongly be 8.
		{"1..100 p7", oneToN(100), 7, 7},
		{"1..100 p55", oneToN(100), 55, 55},
		{"1..100 p50", oneToN(100), 50, 50},
		{"1..100 p95", oneToN(100), 95, 95},
		{"1..100 p99", oneToN(100), 99, 99},
		{"1..100 p99.5", oneToN(100), 99.5, 100}, // ceil(99.5) = 100
		// 1..1000 at p99.9: 0.999*1000 = 999 exactly -> 999.
		{"1..1000 p99.9", oneToN(1000), 99.9, 999},
		// One value is every percentile.
		{"single p1", d(7), 1, 7},
		{"single p99", d(7), 99, 7},
		// Repeated values: 1 1 2 2 2 9, p50 -> ceil(3) = 3 -> 2; p84 ->
		// ceil(5.04) = 6 -> 9; p83 -> ceil(4.98) = 5 -> 2.
		{"dups p50", d(1, 1, 2, 2, 2, 9), 50, 2},
		{"dups p84", d(1, 1, 2, 2, 2, 9), 84, 9},
		{"dups p83", d(1, 1, 2, 2, 2, 9), 83, 2},
		{"empty", nil, 50, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := percentile(tt.sorted, tt.p); got != tt.want {
				t.Errorf("percentile(p%v) = %v, want %v", tt.p, got, tt.want)
			}
		})
	}
}

func TestSummarize(t *testing.T) {
	// 1..200 ms in random order. By hand: min 1, max 200; p50 rank
	// ceil(100) = 100 -> 100ms; p95 rank 190 -> 190ms; p99 rank 198 -> 198ms.
	var ds []time.Duration
	for i := 1; i <= 200; i++ {
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	rand.Shuffle(len(ds), func(i, j int) { ds[i], ds[j] = ds[j], ds[i] })
	orig := slices.Clone(ds)
	s := summarize(ds)
	want := latencySummary{Count: 200, Min: time.Millisecond, P50: 100 * time.Millisecond,
		P95: 190 * time.Millisecond, P99: 198 * time.Millisecond, Max: 200 * time.Millisecond}
	if s != want {
		t.Errorf("summarize = %+v, want %+v", s, want)
	}
	if !slices.Equal(ds, orig) {
		t.Error("summarize reordered its input")
	}
	if (summarize(nil) != latencySummary{}) {
		t.Error("summarize(nil) is not zero")
	}
	if got := ms(1500 * time.Microsecond); got != 1.5 {
		t.Errorf("ms(1.5ms) = %v", got)
	}
}
