package egress

import (
	"math"
	"strings"
)

// Thresholds of the DNS tunnelling flags. Names that carry data out encode
// it in long labels of random-looking characters; ordinary names rarely
// have a label over 40 characters or one of 16 or more that looks random.
const (
	longLabel      = 40
	longName       = 120
	manyLabels     = 10
	entropyMinLen  = 16
	entropyBitsMin = 3.5
)

// Flags of a DNS query (EgressEvent.Flags).
const (
	FlagLongLabel   = "long-label"
	FlagLongName    = "long-name"
	FlagManyLabels  = "many-labels"
	FlagHighEntropy = "high-entropy"
)

// TunnelFlags returns the flags of a queried name that suggest DNS
// tunnelling; nil for an ordinary name. They are hints for the audit log
// (the query is answered by the policy alone).
func TunnelFlags(name string) []string {
	var flags []string
	if len(name) > longName {
		flags = append(flags, FlagLongName)
	}
	labels := strings.Split(strings.TrimSuffix(name, "."), ".")
	if len(labels) > manyLabels {
		flags = append(flags, FlagManyLabels)
	}
	long, random := false, false
	for _, l := range labels {
		if len(l) > longLabel {
			long = true
		}
		// Words joined by hyphens ("my-load-balancer-1234567890") are
		// names; a long run without one that looks random is encoding.
		for _, run := range strings.FieldsFunc(l, func(r rune) bool { return r == '-' || r == '_' }) {
			if len(run) >= entropyMinLen && entropy(run) >= entropyBitsMin {
				random = true
			}
		}
	}
	if long {
		flags = append(flags, FlagLongLabel)
	}
	if random {
		flags = append(flags, FlagHighEntropy)
	}
	return flags
}

// entropy is the Shannon entropy of s in bits per byte, case folded.
func entropy(s string) float64 {
	if s == "" {
		return 0
	}
	var counts [256]int
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		counts[c]++
	}
	n := float64(len(s))
	h := 0.0
	for _, c := range counts {
		if c > 0 {
			p := float64(c) / n
			h -= p * math.Log2(p)
		}
	}
	return h
}
