package e2e_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
)

// TestBenchAbuseOverhead measures airlockd's CPU on a node running 8
// sandboxes (8 sessions, each with a program that wakes every 100 ms),
// with the abuse detectors and with --no-abuse: utime+stime of the
// airlockd process over 30 s, from /proc. For BENCHMARKS.md; run with
// AIRLOCK_BENCH_ABUSE=1.
func TestBenchAbuseOverhead(t *testing.T) {
	if os.Getenv("AIRLOCK_BENCH_ABUSE") == "" {
		t.Skip("set AIRLOCK_BENCH_ABUSE=1 to measure (not a test)")
	}
	n := newTestNode(t, nodeOptions{name: "abusebench"})
	tmp, bin := n.dir, n.bin
	base := n.args("--pool-max", "0", "--warm", "", "--no-snapshots", "--no-egress")
	for _, mode := range []struct {
		name  string
		extra []string
	}{{"with the detectors", nil}, {"--no-abuse", []string{"--no-abuse"}}, {"with the detectors (again)", nil}} {
		d := n.track(startDaemon(t, bin, append(append([]string{}, base...), mode.extra...)))
		keyBytes, err := os.ReadFile(filepath.Join(tmp, "default.key"))
		if err != nil {
			t.Fatal(err)
		}
		c := newClient(t, d.url, strings.TrimSpace(string(keyBytes)))
		ctx := context.Background()
		var ids []string
		for i := 0; i < 8; i++ {
			s, _, err := c.CreateSession(ctx, airlock.CreateSessionRequest{Image: "base"})
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, s.ID)
			if _, err := c.Exec(ctx, s.ID, airlock.SessionExecRequest{Shell: "nohup sh -c 'while :; do sleep 0.1; done' >/dev/null 2>&1 &"}); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(3 * time.Second) // settle: the creations' own CPU is not measured
		c0 := procCPU(t, d.pid())
		const window = 30 * time.Second
		time.Sleep(window) // the measurement: a fixed span of wall time
		used := procCPU(t, d.pid()) - c0
		t.Logf("BENCH airlockd %s, 8 sessions: %v CPU in %v (%.2f%% of one core)", mode.name, used.Round(time.Millisecond), window, 100*used.Seconds()/window.Seconds())
		for _, id := range ids {
			c.DeleteSession(ctx, id)
		}
		d.stop(t)
	}
}

// procCPU is a process's user and system time, from /proc/<pid>/stat.
func procCPU(t *testing.T, pid int) time.Duration {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * time.Second / 100 // clock ticks (USER_HZ 100)
}
