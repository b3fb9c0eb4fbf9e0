package main

import (
	"math"
	"slices"
	"time"
)

// percentile returns the nearest-rank p-th percentile (0 <= p <= 100) of
// values sorted in ascending order: the value at rank ceil(p/100 * n),
// counting from 1, with rank at least 1. It is 0 for no values.
func percentile(sorted []time.Duration, p float64) time.Duration {
	n := len(sorted)
	if n == 0 {
		return 0
	}
	// Multiplying before dividing, and the epsilon, keep float error from
	// moving an exact rank up by one: (7/100)*100 is 7.000000000000001.
	rank := int(math.Ceil(p*float64(n)/100 - 1e-9))
	rank = min(max(rank, 1), n)
	return sorted[rank-1]
}

// latencySummary is the distribution of a set of latencies.
type latencySummary struct {
	Count                   int
	Min, P50, P95, P99, Max time.Duration
}

// summarize computes the summary of ds (which it does not modify).
func summarize(ds []time.Duration) latencySummary {
	s := slices.Clone(ds)
	slices.Sort(s)
	if len(s) == 0 {
		return latencySummary{}
	}
	return latencySummary{
		Count: len(s),
		Min:   s[0],
		P50:   percentile(s, 50),
		P95:   percentile(s, 95),
		P99:   percentile(s, 99),
		Max:   s[len(s)-1],
	}
}

// ms is d in milliseconds, rounded to microseconds.
func ms(d time.Duration) float64 {
	return math.Round(float64(d)/float64(time.Microsecond)) / 1000
}
