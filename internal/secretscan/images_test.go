package secretscan_test

import (
	"context"
	"testing"

	"github.com/airlockhq/airlock/internal/secretscan"
	"github.com/airlockhq/airlock/internal/testenv"
	"github.com/airlockhq/airlock/service/image"
)

// TestStockImages scans the built stock images: neither may hold a
// finding that is not allowed, and every allowed one is printed with its
// reason. It prints the time each scan took (BENCHMARKS.md). Under the
// race detector only base is scanned (python-ds, 1.2 GiB, would take
// minutes); every build of python-ds runs the same scan.
func TestStockImages(t *testing.T) {
	for _, name := range image.Names() {
		if raceEnabled && name != "base" {
			t.Logf("%s: not scanned under the race detector", name)
			continue
		}
		t.Run(name, func(t *testing.T) {
			img := testenv.Image(t, name)
			rep, err := secretscan.Default().ScanTree(context.Background(), img.Rootfs, secretscan.ModeFiles)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: %d files, %.1f MiB in %v (%.0f MiB/s); %d skipped", name, rep.Files,
				float64(rep.Bytes)/(1<<20), rep.Duration, float64(rep.Bytes)/(1<<20)/rep.Duration.Seconds(), len(rep.Skipped))
			for _, s := range rep.Skipped {
				t.Logf("skipped %s: %s", s.Path, s.Reason)
			}
			for _, f := range rep.Allowed() {
				t.Logf("allowed: %s", f)
			}
			if err := rep.Err("image " + name); err != nil {
				t.Error(err)
				for _, f := range rep.Findings {
					if f.Allowed == "" {
						t.Logf("finding: %s", f)
					}
				}
			}
		})
	}
}
