//go:build race

package secretscan_test

// raceEnabled: the race detector instruments the scan's byte loop, which
// then reads a Debian rootfs some fifty times slower.
const raceEnabled = true
