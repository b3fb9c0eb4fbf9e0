package microvm_test

import (
	"path/filepath"
	"testing"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/backend/conformance"
	"github.com/airlockhq/airlock/internal/testenv"
)

// TestConformance runs the backend conformance suite on microVMs. Under
// TCG (no usable KVM here) code runs several times slower than on a
// host: cases that measure throughput before a deadline get 4 times the
// time (Slowdown), with the same assertions.
func TestConformance(t *testing.T) {
	b := testenv.MicroVM(t)
	cfg := b.Config()
	conformance.Run(t, b, conformance.Options{
		Image:        testenv.Image(t, "base"),
		WatchDirs:    []string{filepath.Join(cfg.StateDir, "vms")},
		CgroupParent: cfg.CgroupParent,
		Slowdown:     slowdown(b),
	})
}

// slowdown is 4 under TCG, 1 with KVM.
func slowdown(b interface{ Capabilities() airlock.Capabilities }) float64 {
	if b.Capabilities().Accelerator == "tcg" {
		return 4
	}
	return 1
}
