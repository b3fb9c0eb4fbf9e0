package microvm_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/agent/protocol"
	"github.com/airlockhq/airlock/backend/microvm"
	"github.com/airlockhq/airlock/internal/testenv"
)

// BenchmarkColdBoot measures a cold boot to the agent's hello (Create)
// and reports its p50 and the slowest run; each VM is destroyed before
// the next boots. Run it with -benchtime=5x: every run is a full boot.
func BenchmarkColdBoot(b *testing.B) {
	be := testenv.MicroVM(b)
	img := testenv.Image(b, "base")
	ctx := context.Background()
	var took []time.Duration
	var rss []int64
	for i := 0; b.Loop(); i++ {
		start := time.Now()
		sb, err := be.Create(ctx, airlock.SandboxSpec{ID: "bench-" + testenv.RandomID(), Image: img, Limits: airlock.DefaultLimits})
		if err != nil {
			b.Fatal(err)
		}
		took = append(took, time.Since(start))
		b.StopTimer()
		rss = append(rss, vmmRSS(b, sb.(*microvm.Sandbox).VMMPID()))
		if err := sb.Destroy(ctx); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)/2].Milliseconds()), "p50-ms")
	b.ReportMetric(float64(took[len(took)-1].Milliseconds()), "max-ms")
	slices.Sort(rss)
	b.ReportMetric(float64(rss[len(rss)/2])/(1<<20), "vmm-rss-MiB")
	b.Logf("accel %s, boots: %v", be.Accelerator(), took)
}

// vmmRSS is the resident memory of the VMM process (guest RAM it has
// touched included).
func vmmRSS(b *testing.B, pid int) int64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			var kb int64
			fmt.Sscanf(strings.TrimSpace(v), "%d", &kb)
			return kb << 10
		}
	}
	b.Fatal("no VmRSS")
	return 0
}

// BenchmarkExecPrint measures python3 -c 'print(1)' in one booted VM,
// from the exec request to its exit status, and reports the p50.
func BenchmarkExecPrint(b *testing.B) {
	be := testenv.MicroVM(b)
	img := testenv.Image(b, "base")
	ctx := context.Background()
	sb, err := be.Create(ctx, airlock.SandboxSpec{ID: "bench-" + testenv.RandomID(), Image: img, Limits: airlock.DefaultLimits})
	if err != nil {
		b.Fatal(err)
	}
	defer sb.Destroy(ctx)
	var took []time.Duration
	for b.Loop() {
		start := time.Now()
		p, err := sb.Agent().Exec(ctx, protocol.ExecRequest{Argv: []string{"python3", "-c", "print(1)"}}, nil, nil)
		if err != nil {
			b.Fatal(err)
		}
		if st, err := p.Wait(ctx); err != nil || st.Code != 0 {
			b.Fatalf("exit %+v, %v", st, err)
		}
		took = append(took, time.Since(start))
	}
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)/2].Milliseconds()), "p50-ms")
	b.ReportMetric(float64(took[len(took)-1].Milliseconds()), "max-ms")
}
