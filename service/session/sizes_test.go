package session_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/service/session"
)

// Each session size's limits hold outside the sandbox, and the records
// name them: its CPU quota read from the host cgroup (spinners, one more
// than its vCPUs; on a host with fewer cores than the size the host
// bounds it first), its disk (filled with fallocate: the workspace's own
// file system has the size's room, and the exec's limits_hit says disk)
// and its memory (processes each under the per-process limit, together
// over the sandbox's: the host's OOM killer ends the session, reason
// out_of_memory).
func TestSessionSizeLimits(t *testing.T) {
	s := newStack(t, func(c *session.Config) { c.Sizes = session.DefaultSizes })
	ctx := context.Background()
	for _, size := range airlock.SessionSizes {
		z := session.DefaultSizes[size]
		t.Run(string(size), func(t *testing.T) {
			sess, _, err := s.mgr.CreateSession(ctx, s.a.tenant, airlock.CreateSessionRequest{Image: "base", Size: size}, "")
			if err != nil {
				t.Fatal(err)
			}
			defer s.mgr.DeleteSession(ctx, s.a.tenant, sess.ID)
			exec := func(code string) *airlock.Execution {
				t.Helper()
				e, err := s.mgr.Exec(ctx, s.a.tenant, sess.ID, airlock.SessionExecRequest{Cmd: []string{"python3", "-c", code}, TimeoutSec: 120}, nil)
				if err != nil {
					t.Fatal(err)
				}
				return e
			}

			// CPU: the session's CPU time is the host cgroup's.
			before, _ := s.mgr.Session(ctx, s.a.tenant, sess.ID)
			start := time.Now()
			e := exec(fmt.Sprintf(`
import os, time
end = time.time() + 3
kids = []
for _ in range(%d):
    pid = os.fork()
    if pid == 0:
        while time.time() < end: pass
        os._exit(0)
    kids.append(pid)
for k in kids: os.waitpid(k, 0)
print("spun")
`, int(z.CPUs)+1))
			elapsed := time.Since(start)
			after, _ := s.mgr.Session(ctx, s.a.tenant, sess.ID)
			rate := float64(after.Usage.CPUMS-before.Usage.CPUMS) / 1000 / elapsed.Seconds()
			t.Logf("%s: %d spinners used %.2f CPU-seconds a second (quota %g vCPU)", size, int(z.CPUs)+1, rate, z.CPUs)
			if !strings.Contains(e.Stdout, "spun") || rate > z.CPUs*1.15+0.05 {
				t.Errorf("CPU: %.2f CPU-seconds a second under %g vCPU (stdout %q)", rate, z.CPUs, e.Stdout)
			}

			// Disk: the workspace holds the size's bytes and no more.
			e = exec(`
import os
st = os.statvfs("/workspace")
print("total", st.f_blocks * st.f_frsize)
fd = os.open("/workspace/fill", os.O_CREAT | os.O_WRONLY)
off, chunk = 0, 64 << 20
while True:
    try:
        os.posix_fallocate(fd, off, chunk)
        off += chunk
    except OSError as e:
        if chunk <= 4096:
            print("full", off, e.errno)
            break
        chunk //= 2
`)
			var total, filled int64
			fmt.Sscanf(e.Stdout[strings.Index(e.Stdout, "total"):], "total %d", &total)
			if i := strings.Index(e.Stdout, "full"); i >= 0 {
				fmt.Sscanf(e.Stdout[i:], "full %d", &filled)
			}
			t.Logf("%s: workspace of %d bytes, filled with %d (limit %d); limits_hit %v", size, total, filled, z.DiskBytes, e.LimitsHit)
			if total > z.DiskBytes || total < z.DiskBytes*9/10 || filled == 0 || filled > z.DiskBytes {
				t.Errorf("disk: total %d, filled %d, want about %d", total, filled, z.DiskBytes)
			}
			if !slices.Contains(e.LimitsHit, airlock.LimitDisk) || e.EndedBy != "" {
				t.Errorf("disk: the full workspace's exec: limits_hit %v, ended_by %q", e.LimitsHit, e.EndedBy)
			}
			exec(`import os; os.remove("/workspace/fill")`)

			// Memory: more than the sandbox's in processes that each
			// stay under the per-process limit. The sandbox's memory
			// never passes its limit on the host: gVisor's kernel kills
			// processes inside at it (or the host's OOM killer ends the
			// whole session, reason out_of_memory); the exec's record
			// says the memory limit was reached.
			per := int64(300 << 20)
			n := z.MemoryBytes/per + 2
			start = time.Now()
			e, err = s.mgr.Exec(ctx, s.a.tenant, sess.ID, airlock.SessionExecRequest{TimeoutSec: 120, Cmd: []string{"python3", "-c", fmt.Sprintf(`
import os, time
kids = []
for _ in range(%d):
    pid = os.fork()
    if pid == 0:
        b = bytearray(%d)
        for i in range(0, len(b), 4096): b[i] = 1
        time.sleep(3)
        os._exit(0)
    kids.append(pid)
killed = sum(1 for k in kids if os.waitpid(k, 0)[1] != 0)
print("killed", killed, "of", len(kids))
`, n, per)}}, nil)
			got, _ := s.mgr.Session(ctx, s.a.tenant, sess.ID)
			t.Logf("%s: %d x %d MiB in %v: stdout %q, limits_hit %v, ended_by %q; session %s %s, peak %d MiB (limit %d MiB)", size, n, per>>20,
				time.Since(start).Round(time.Millisecond), e.Stdout, e.LimitsHit, e.EndedBy, got.State, got.EndReason, got.Usage.PeakMemoryMB, z.MemoryBytes>>20)
			switch {
			case err == nil && got.State.Live():
				if strings.Contains(e.Stdout, "killed 0 ") || !slices.Contains(e.LimitsHit, airlock.LimitMemory) {
					t.Errorf("memory: every process survived %d x %d MiB under %d MiB, or the record does not say memory", n, per>>20, z.MemoryBytes>>20)
				}
			case !got.State.Live():
				if got.EndReason != airlock.EndOutOfMemory {
					t.Errorf("memory: the session ended by %q", got.EndReason)
				}
			default:
				t.Errorf("memory: the exec failed: %v", err)
			}
			// (The kernel charges in batches: the peak may pass the
			// limit by a page or so, rounded up here to a MiB.)
			if got.Usage.PeakMemoryMB > z.MemoryBytes>>20+1 {
				t.Errorf("memory: the host measured %d MiB, over the limit of %d MiB", got.Usage.PeakMemoryMB, z.MemoryBytes>>20)
			}
		})
	}
}
