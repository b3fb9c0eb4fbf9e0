package microvm_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/agent/protocol"
	"github.com/airlockhq/airlock/backend/microvm"
	"github.com/airlockhq/airlock/backend/microvm/jailer"
	"github.com/airlockhq/airlock/internal/testenv"
)

// TestMain lets the test binary be QEMU's jailer.
func TestMain(m *testing.M) {
	jailer.RunIfAsked()
	os.Exit(m.Run())
}

// A VM boots, runs a program on its own kernel as the sandbox user, has
// no network device, and leaves nothing on the host once destroyed.
func TestBoot(t *testing.T) {
	b := testenv.MicroVM(t)
	img := testenv.Image(t, "base")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	start := time.Now()
	sb, err := b.Create(ctx, airlock.SandboxSpec{ID: "boot-" + testenv.RandomID(), Image: img, Limits: airlock.DefaultLimits})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("booted to the agent's hello in %v (%s)", time.Since(start).Round(time.Millisecond), b.Accelerator())
	defer sb.Destroy(ctx)
	var out strings.Builder
	p, err := sb.Agent().Exec(ctx, protocol.ExecRequest{Argv: []string{"sh", "-c", "id -u; uname -r; echo $(ls /sys/class/net); echo hi > /workspace/a.txt"}}, &out, &out)
	if err != nil {
		t.Fatal(err)
	}
	st, err := p.Wait(ctx)
	if err != nil || st.Code != 0 {
		t.Fatalf("exit %+v, %v: %s", st, err, out.String())
	}
	host, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 3 || lines[0] != "1000" || lines[1] == strings.TrimSpace(string(host)) {
		t.Fatalf("want uid 1000 on a kernel other than the host's (%s): %q", host, out.String())
	}
	// No network asked for: no network device at all.
	if lines[2] != "lo" {
		t.Errorf("interfaces of a VM without a network: %q, want lo only", lines[2])
	}
	if err := sb.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(sb.WorkspaceDir() + "/a.txt"); err != nil || string(got) != "hi\n" {
		t.Fatalf("workspace after stop: %q, %v", got, err)
	}
	// The host reads the disk the guest wrote read-only from the first
	// mount, on a read-only loop device: it never replays the guest's
	// journal or writes to its disk.
	opts, super, dev := mountOf(t, filepath.Dir(sb.WorkspaceDir()))
	if !hasOpt(opts, "ro") || !hasOpt(opts, "nosuid") || !hasOpt(opts, "nodev") || !hasOpt(opts, "noexec") || !hasOpt(super, "ro") {
		t.Errorf("scratch disk mounted %q (super %q), want ro,nosuid,nodev,noexec", opts, super)
	}
	if ro, err := os.ReadFile("/sys/block/" + filepath.Base(dev) + "/ro"); err != nil || strings.TrimSpace(string(ro)) != "1" {
		t.Errorf("loop device %s of the scratch disk is writable: %q, %v", dev, ro, err)
	}
	if err := sb.Destroy(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.CheckClean(ctx); err != nil {
		t.Fatal(err)
	}
}

// After a crash (a second backend on the same state directory stands for
// the next airlockd), Reconcile kills the VMM left running and removes
// its machine directory, disk, chroot and cgroup.
func TestReconcileAfterCrash(t *testing.T) {
	b := testenv.MicroVM(t)
	img := testenv.Image(t, "base")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	id := "crash-" + testenv.RandomID()
	sb, err := b.Create(ctx, airlock.SandboxSpec{ID: id, Image: img, Limits: airlock.DefaultLimits})
	if err != nil {
		t.Fatal(err)
	}
	vm := sb.(*microvm.Sandbox)
	pid := vm.VMMPID()
	next, err := microvm.New(b.Config())
	if err != nil {
		t.Fatal(err)
	}
	ids, err := next.Reconcile(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(ids, id) {
		t.Fatalf("reconcile ended %v, want %s", ids, id)
	}
	select {
	case <-sb.Done():
	case <-time.After(30 * time.Second):
		t.Fatalf("the VMM (pid %d) still runs after reconcile", pid)
	}
	if err := syscall.Kill(pid, 0); err == nil {
		t.Fatalf("the VMM (pid %d) is still there", pid)
	}
	if err := next.CheckClean(ctx); err != nil {
		t.Fatalf("after reconcile: %v", err)
	}
	sb.Destroy(ctx) // the first backend forgets it (its files are gone already)
}

// mountOf returns the mount options, the super options and the source of
// the mount at dir.
func mountOf(t *testing.T, dir string) (opts, super, dev string) {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 10 || f[4] != dir {
			continue
		}
		for i, x := range f {
			if x == "-" && i+3 < len(f) {
				return f[5], f[i+3], f[i+2]
			}
		}
	}
	t.Fatalf("no mount at %s", dir)
	return "", "", ""
}

func hasOpt(opts, o string) bool { return slices.Contains(strings.Split(opts, ","), o) }
