package session_test

import (
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/teststack"
	"github.com/airlockhq/airlock/service/provision"
)

// TestKeepBenchmark measures pause and resume, snapshots and forks for
// BENCHMARKS.md. It is a measurement, not a check: run it on purpose with
// AIRLOCK_KEEP_BENCH=1 (go test -run TestKeepBenchmark -v ./session).
func TestKeepBenchmark(t *testing.T) {
	if os.Getenv("AIRLOCK_KEEP_BENCH") != "1" {
		t.Skip("a measurement: set AIRLOCK_KEEP_BENCH=1 to run it")
	}
	s := newStackWith(t, teststack.Options{Admission: provision.Admission{Sessions: 16, SessionsPerTenant: 16}})
	ctx := ctxFor(t, 20*time.Minute)
	c := s.a.c
	const rounds = 5
	median := func(ds []time.Duration) time.Duration {
		sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
		return ds[len(ds)/2]
	}
	dirBytes := func(dir string) int64 {
		var n int64
		filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
			if err == nil && fi.Mode().IsRegular() {
				if st, ok := fi.Sys().(interface{ Blocks() int64 }); ok {
					n += st.Blocks() * 512
				} else {
					n += fi.Size()
				}
			}
			return nil
		})
		return n
	}
	for _, tc := range []struct {
		name  string
		setup string
	}{
		{"idle python-ds", ""},
		{"python-ds, 200 MB in the workspace", "head -c 200000000 /dev/urandom > /workspace/big.bin"},
	} {
		sess := s.create(s.a, airlock.CreateSessionRequest{Image: "python-ds", TimeoutS: 3600})
		if tc.setup != "" {
			s.shell(s.a, sess.ID, tc.setup)
		}
		py, err := c.CreateContext(ctx, sess.ID, airlock.ContextPython)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.RunCell(ctx, sess.ID, py.ID, airlock.RunCellRequest{Code: "import numpy, pandas\nx = 1"}); err != nil {
			t.Fatal(err)
		}
		var pauses, resumes []time.Duration
		var saved, disk int64
		for i := 0; i < rounds; i++ {
			start := time.Now()
			if _, err := c.PauseSession(ctx, sess.ID); err != nil {
				t.Fatal(err)
			}
			pauses = append(pauses, time.Since(start))
			saved = dirBytes(filepath.Join(s.cfg.Keep.PauseDir, sess.ID, "checkpoint"))
			disk = dirBytes(filepath.Join(s.cfg.Keep.PauseDir, sess.ID, "disk.img"))
			start = time.Now()
			if _, err := c.ResumeSession(ctx, sess.ID); err != nil {
				t.Fatal(err)
			}
			if _, err := c.RunCell(ctx, sess.ID, py.ID, airlock.RunCellRequest{Code: "x"}); err != nil {
				t.Fatal(err)
			}
			resumes = append(resumes, time.Since(start))
		}
		start := time.Now()
		snap, err := c.CreateSnapshot(ctx, sess.ID, airlock.CreateSnapshotRequest{})
		if err != nil {
			t.Fatal(err)
		}
		snapTime := time.Since(start)
		start = time.Now()
		restored := s.create(s.a, airlock.CreateSessionRequest{FromSnapshot: snap.ID})
		restoreTime := time.Since(start)
		t.Logf("%s: pause %v, resume to first cell %v (median of %d); paused: checkpoint %.1f MB, disk image %.1f MB allocated; snapshot %v, %.1f MB sealed; new session from it %v",
			tc.name, median(pauses), median(resumes), rounds, float64(saved)/1e6, float64(disk)/1e6, snapTime, float64(snap.Bytes)/1e6, restoreTime)
		c.DeleteSession(ctx, restored.ID)
		c.DeleteSnapshot(ctx, snap.ID)
		start = time.Now()
		mem, err := c.CreateSnapshot(ctx, sess.ID, airlock.CreateSnapshotRequest{IncludeMemory: true})
		if err != nil {
			t.Fatal(err)
		}
		memTime := time.Since(start)
		start = time.Now()
		fromMem := s.create(s.a, airlock.CreateSessionRequest{FromSnapshot: mem.ID})
		t.Logf("%s: memory snapshot %v, %.1f MB sealed; new session from it %v", tc.name, memTime, float64(mem.Bytes)/1e6, time.Since(start))
		c.DeleteSession(ctx, fromMem.ID)
		c.DeleteSnapshot(ctx, mem.ID)
		if tc.setup == "" {
			for _, n := range []int{1, 4, 8} {
				for _, mem := range []bool{true, false} {
					start := time.Now()
					res, err := c.ForkSession(ctx, sess.ID, airlock.ForkRequest{Count: n, IncludeMemory: mem})
					if err != nil {
						t.Fatalf("fork %d: %v", n, err)
					}
					t.Logf("fork N=%d include_memory=%v: %v", n, mem, time.Since(start))
					for _, f := range res.Sessions {
						c.DeleteSession(ctx, f.ID)
					}
				}
			}
		}
		c.DeleteSession(ctx, sess.ID)
	}
}
