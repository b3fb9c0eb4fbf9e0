package gvisor_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/agent/protocol"
	"github.com/airlockhq/airlock/internal/testenv"
)

func newSandbox(t *testing.T, imageName string, limits airlock.Limits) airlock.Sandbox {
	t.Helper()
	b := testenv.GVisor(t)
	img := testenv.Image(t, imageName)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sb, err := b.Create(ctx, airlock.SandboxSpec{ID: "t-" + testenv.RandomID(), Image: img, Limits: limits})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	t.Cleanup(func() {
		if err := sb.Destroy(context.Background()); err != nil {
			t.Errorf("destroy: %v", err)
		}
	})
	return sb
}

func run(t *testing.T, sb airlock.Sandbox, argv ...string) (string, string, protocol.ExitStatus) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out, errb bytes.Buffer
	p, err := sb.Agent().Exec(ctx, protocol.ExecRequest{Argv: argv}, &out, &errb)
	if err != nil {
		t.Fatalf("exec %v: %v", argv, err)
	}
	st, err := p.Wait(ctx)
	if err != nil {
		t.Fatalf("wait %v: %v", argv, err)
	}
	return out.String(), errb.String(), st
}

func TestSandboxBasics(t *testing.T) {
	sb := newSandbox(t, "base", airlock.DefaultLimits)
	cases := []struct {
		name   string
		argv   []string
		check  func(stdout string) bool
		detail string
	}{
		{"not root", []string{"id", "-u"}, func(s string) bool { return strings.TrimSpace(s) == "1000" }, "uid 1000"},
		{"no capabilities", []string{"grep", "^CapEff", "/proc/self/status"}, func(s string) bool { return strings.Contains(s, "0000000000000000") }, "CapEff 0"},
		{"only loopback", []string{"ls", "/sys/class/net"}, func(s string) bool { return strings.TrimSpace(s) == "lo" || strings.TrimSpace(s) == "" }, "lo only"},
		{"proc shows only the sandbox", []string{"sh", "-c", "ls -d /proc/[0-9]* | wc -l"}, func(s string) bool {
			s = strings.TrimSpace(s)
			return s == "3" || s == "2" || s == "4"
		}, "agent, sh, ls (and maybe wc)"},
		{"rootfs read-only", []string{"sh", "-c", "grep ' / ' /proc/mounts"}, func(s string) bool { return strings.Contains(s, " ro,") || strings.Contains(s, " ro ") }, "/ mounted ro"},
		{"workspace writable", []string{"sh", "-c", "echo hi > /workspace/f && cat /workspace/f"}, func(s string) bool { return s == "hi\n" }, "hi"},
		{"no host files", []string{"sh", "-c", "test -e /var/lib/airlock && echo leak || echo ok"}, func(s string) bool { return s == "ok\n" }, "ok"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, errOut, _ := run(t, sb, c.argv...)
			if !c.check(out) {
				t.Errorf("%v: got stdout %q stderr %q, want %s", c.argv, out, errOut, c.detail)
			}
		})
	}
	if _, err := os.Stat(filepath.Join(sb.WorkspaceDir(), "f")); err != nil {
		t.Errorf("file written in the sandbox not visible to the host collector: %v", err)
	}
}

func TestMemoryLimitKillsSandbox(t *testing.T) {
	limits := airlock.DefaultLimits
	limits.MemoryBytes = 256 << 20
	sb := newSandbox(t, "base", limits)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p, err := sb.Agent().Exec(ctx, protocol.ExecRequest{Argv: []string{"python3", "-c", "x = bytearray(1 << 30); x[::4096] = b'a' * len(x[::4096]); print('survived')"}}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	st, werr := p.Wait(ctx)
	stats, err := sb.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if werr == nil && st.Code == 0 {
		t.Fatalf("1 GiB allocation succeeded under a 256 MiB limit")
	}
	if !stats.OOMKilled && st.Code == 0 {
		t.Errorf("no OOM recorded: status %+v, stats %+v", st, stats)
	}
	t.Logf("status %+v wait err %v stats %+v", st, werr, stats)
}

func TestProcessLimit(t *testing.T) {
	limits := airlock.DefaultLimits
	limits.Pids = 32
	sb := newSandbox(t, "base", limits)
	out, _, _ := run(t, sb, "python3", "-c", `
import os, time
n = 0
try:
    for i in range(200):
        if os.fork() == 0:
            time.sleep(5); os._exit(0)
        n += 1
except OSError as e:
    print("refused", e.errno)
print("forked", n)
`)
	if !strings.Contains(out, "refused") {
		t.Fatalf("fork past the limit was not refused: %q", out)
	}
}

func TestDiskLimit(t *testing.T) {
	limits := airlock.DefaultLimits
	limits.DiskBytes = 32 << 20
	sb := newSandbox(t, "base", limits)
	out, _, _ := run(t, sb, "sh", "-c", "dd if=/dev/zero of=/workspace/big bs=1M count=64 2>&1; echo rc=$?")
	if !strings.Contains(out, "No space left") {
		t.Fatalf("writing past the disk cap did not fail with ENOSPC: %q", out)
	}
}

// The CPU quota holds outside the sandbox: two spinning processes in a
// sandbox of N vCPUs use at most about N CPU-seconds a second, measured
// from the host cgroup (the sandbox's kernel included).
func TestCPUQuota(t *testing.T) {
	for _, cpus := range []float64{1, 0.5} {
		t.Run(fmt.Sprint(cpus), func(t *testing.T) {
			limits := airlock.DefaultLimits
			limits.CPUs = cpus
			sb := newSandbox(t, "base", limits)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			before, err := sb.Stats(ctx)
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			out, _, st := run(t, sb, "python3", "-c", `
import os, time
end = time.time() + 4
if os.fork() == 0:
    while time.time() < end: pass
    os._exit(0)
while time.time() < end: pass
os.wait()
print("spun")
`)
			elapsed := time.Since(start)
			after, err := sb.Stats(ctx)
			if err != nil {
				t.Fatal(err)
			}
			used := (after.CPUTime - before.CPUTime).Seconds() / elapsed.Seconds()
			t.Logf("%.2g vCPU: %.2f CPU-seconds a second over %v", cpus, used, elapsed.Round(time.Millisecond))
			if st.Code != 0 || !strings.Contains(out, "spun") {
				t.Fatalf("the spinners: %+v %q", st, out)
			}
			if used > cpus*1.15+0.05 {
				t.Errorf("two spinners used %.2f CPU-seconds a second under a quota of %.2g vCPU", used, cpus)
			}
		})
	}
}
