package qemu_test

import (
	"context"
	"os/exec"
	"testing"
	"time"

	"github.com/airlockhq/airlock/backend/microvm/qemu"
	"github.com/airlockhq/airlock/backend/microvm/vmm"
	"github.com/airlockhq/airlock/internal/testenv/testreq"
)

// A kernel that cannot boot (here: none) never makes the probe choose
// KVM, and the probe ends within its bound with a reason.
func TestProbeWithoutBootableKernel(t *testing.T) {
	q, err := exec.LookPath("qemu-system-x86_64")
	if err != nil {
		testreq.Skip(t, "skipped: qemu-system-x86_64 not installed; scripts/setup.sh installs it")
	}
	start := time.Now()
	accel, why := qemu.Probe(context.Background(), q, "/nonexistent/vmlinuz")
	if accel != vmm.AccelTCG || why == "" {
		t.Fatalf("Probe = %s (%q), want tcg with a reason", accel, why)
	}
	if d := time.Since(start); d > qemu.ProbeTimeout+2*time.Second {
		t.Fatalf("the probe took %v", d)
	}
}
