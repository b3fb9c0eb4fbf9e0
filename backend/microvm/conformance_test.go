package microvm_test

import (
	"path/filepath"
	"runtime"
	"testing"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/backend/conformance"
	"github.com/airlockhq/airlock/internal/testenv"
)

// TestConformance runs the backend conformance suite on microVMs. Under
// TCG (no usable KVM here) code runs several times slower than on a
// host: cases that measure throughput before a deadline get 4 times the
// time (Slowdown), with the same assertions. Cases run as many at once
// as the machine has cores (each VM in its own machine directory, cgroup
// and, with a network, network namespace, all named after its ID, which
// is what each case's host check then covers), also bounded by go test's
// -parallel. The cases' sandboxes of the default limits are restored
// from a checkpoint of one booted VM, as a node's base snapshots are
// (TestBoot and the cases with limits of their own boot).
func TestConformance(t *testing.T) {
	b := testenv.MicroVM(t)
	cfg := b.Config()
	conformance.Run(t, b, conformance.Options{
		Image:        testenv.Image(t, "base"),
		WatchDirs:    []string{filepath.Join(cfg.StateDir, "vms")},
		CgroupParent: cfg.CgroupParent,
		Slowdown:     slowdown(b),
		Parallel:     runtime.NumCPU(),
		Restore:      true,
	})
}

// slowdown is 4 under TCG, 1 with KVM.
func slowdown(b interface{ Capabilities() airlock.Capabilities }) float64 {
	if b.Capabilities().Accelerator == "tcg" {
		return 4
	}
	return 1
}
