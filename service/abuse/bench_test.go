package abuse_test

import (
	"context"
	"os"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/service/abuse"
)

// The measurements of BENCHMARKS.md ("Abuse detectors"), run with
// AIRLOCK_BENCH_ABUSE=N (N runs of each behaviour):
//
//   - detection time per detector: from the request to the event, p50
//     and max over N runs, default thresholds;
//   - the monitor's CPU on a node running 8 sandboxes: the process's CPU
//     time over 30 s with 8 idle sandboxes watched, against the same
//     without a monitor.
func TestBenchDetection(t *testing.T) {
	runs, _ := strconv.Atoi(os.Getenv("AIRLOCK_BENCH_ABUSE"))
	if runs <= 0 {
		t.Skip("set AIRLOCK_BENCH_ABUSE=N to measure (not a test)")
	}
	n := newNode(t, abuse.Config{})
	addr := n.inet.Addr().String()
	behaviours := []behaviour{
		{name: "cpu-spinner", code: "while True:\n    pass\n", detector: airlock.DetectorMining},
		{name: "fork-bomb", code: forkBomb, detector: airlock.DetectorForkBomb},
		{name: "dns-tunnel", network: true, code: dnsTunnel, detector: airlock.DetectorDNSTunnel},
		{name: "stratum", network: true, code: "import socket, time\nwhile True:\n    try:\n        s = socket.create_connection(('" + addr + "', 3333), timeout=3)\n        s.sendall(b'{\"id\": 1, \"method\": \"mining.subscribe\", \"params\": []}\\n')\n        s.recv(100)\n    except OSError: pass\n    time.sleep(1)\n", detector: airlock.DetectorMining},
		{name: "port-scan", network: true, code: "import socket\nport = 1\nwhile True:\n    try: socket.create_connection(('" + addr + "', port), timeout=1).close()\n    except OSError: pass\n    port += 1\n", detector: airlock.DetectorScanning},
		{name: "pool-dns", network: true, code: "import socket, time\nwhile True:\n    try: socket.getaddrinfo('pool.supportxmr.com', 3333)\n    except OSError: pass\n    time.sleep(1)\n", detector: airlock.DetectorMining},
	}
	if only := os.Getenv("AIRLOCK_BENCH_ONLY"); only != "" {
		behaviours = slices.DeleteFunc(behaviours, func(b behaviour) bool { return b.name != only })
	}
	for _, b := range behaviours {
		var times []time.Duration
		for i := 0; i < runs; i++ {
			tn := n.tenant(t, b.name+"-"+strconv.Itoa(i))
			start := time.Now()
			if _, err := n.st.Manager.Execute(context.Background(), tn, "", airlock.ExecuteRequest{Language: airlock.Python, Image: "base",
				Code: b.code, AllowNetwork: b.network, TimeoutSec: 90}); err != nil {
				t.Fatal(err)
			}
			ev, d := n.event(t, tn, start)
			if ev.Detector != b.detector {
				t.Fatalf("%s: %s", b.name, ev.Detector)
			}
			times = append(times, d)
		}
		slices.Sort(times)
		t.Logf("BENCH detection %s (%s): p50 %v, max %v over %d runs", b.name, b.detector,
			times[len(times)/2].Round(time.Millisecond), times[len(times)-1].Round(time.Millisecond), runs)
	}
}

func TestBenchOverhead(t *testing.T) {
	if os.Getenv("AIRLOCK_BENCH_ABUSE") == "" {
		t.Skip("set AIRLOCK_BENCH_ABUSE=N to measure (not a test)")
	}
	n := newNode(t, abuse.Config{Response: abuse.ResponseRecord})
	ctx := context.Background()
	tn := n.tenant(t, "idle")
	var sbs []airlock.Sandbox
	for i := 0; i < 8; i++ {
		sb, err := n.st.Backend.Create(ctx, airlock.SandboxSpec{ID: "bench-" + strconv.Itoa(i) + "-" + tn.ID[:8],
			Image: mustImage(t, n), Limits: airlock.DefaultLimits})
		if err != nil {
			t.Fatal(err)
		}
		defer sb.Destroy(ctx)
		sbs = append(sbs, sb)
	}
	cpu := func() time.Duration {
		var ru syscall.Rusage
		syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	const window = 30 * time.Second
	measure := func() time.Duration {
		c := cpu()
		time.Sleep(window) // the measurement itself: a fixed span of wall time
		return cpu() - c
	}
	without := measure()
	var stops []func()
	for _, sb := range sbs {
		stops = append(stops, n.mon.Watch(airlock.Watched{Sandbox: sb, TenantID: tn.ID, SessionID: sb.ID(), Limits: airlock.DefaultLimits}))
	}
	with := measure()
	for _, s := range stops {
		s()
	}
	t.Logf("BENCH overhead: 8 sandboxes for %v: process CPU %v without the monitor, %v with it (%.2f%% vs %.2f%% of one core)",
		window, without.Round(time.Millisecond), with.Round(time.Millisecond),
		100*without.Seconds()/window.Seconds(), 100*with.Seconds()/window.Seconds())
}

func mustImage(t *testing.T, n *node) *airlock.Image {
	img, err := n.st.Images.Resolve(context.Background(), "base")
	if err != nil {
		t.Fatal(err)
	}
	return img
}
