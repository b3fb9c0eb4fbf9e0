package oneshot_test

import (
	"context"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/teststack"
)

// TestLastSample: a one-shot run ended by a limit says which (ended_by)
// and carries its last resource sample before the end (last_sample), in
// the answer and in the stored record: a memory bomb (memory, with the
// sample's memory well up towards the limit) and a busy loop past its
// timeout (wall_time, with CPU in use). A run no limit ended has none.
func TestLastSample(t *testing.T) {
	limits := airlock.DefaultLimits
	limits.MemoryBytes = 256 << 20
	st := teststack.New(t, teststack.Options{NoServer: true, Limits: limits, MaxTimeout: time.Minute})
	tn := st.NewTenant(t, "last-sample").Tenant
	ctx := context.Background()
	for _, tc := range []struct {
		name, code string
		timeout    int
		endedBy    string
		check      func(*airlock.MetricSample) bool
	}{
		{"memory bomb", "x = []\nwhile True:\n    x.append(bytearray(8 << 20))\n", 60, airlock.LimitMemory,
			func(s *airlock.MetricSample) bool { return s.MemoryBytes >= 64<<20 }},
		{"timeout", "while True:\n    pass\n", 3, airlock.LimitWallTime,
			func(s *airlock.MetricSample) bool { return s.CPUPct > 0 && s.MemoryBytes > 0 }},
		{"no limit", "print(1)\n", 30, "", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, err := st.Manager.Execute(ctx, tn, "", airlock.ExecuteRequest{Language: airlock.Python, Code: tc.code, TimeoutSec: tc.timeout})
			if err != nil {
				t.Fatal(err)
			}
			rec, err := st.Store.Execution(ctx, tn.ID, e.ID)
			if err != nil {
				t.Fatal(err)
			}
			for _, x := range []*airlock.Execution{e, rec} {
				if x.EndedBy != tc.endedBy {
					t.Fatalf("ended_by %q, want %q (exit %d, stderr %q)", x.EndedBy, tc.endedBy, x.ExitCode, x.Stderr)
				}
				if tc.check == nil {
					if x.LastSample != nil {
						t.Fatalf("a run no limit ended has a last sample: %+v", x.LastSample)
					}
					continue
				}
				s := x.LastSample
				if s == nil || !tc.check(s) || s.At.After(*rec.FinishedAt) || s.At.Before(rec.CreatedAt) {
					t.Fatalf("last_sample %+v (created %v, finished %v)", s, rec.CreatedAt, rec.FinishedAt)
				}
			}
			if tc.check != nil && !e.LastSample.At.Equal(rec.LastSample.At) {
				t.Errorf("the answer's sample %+v is not the record's %+v", e.LastSample, rec.LastSample)
			}
			t.Logf("%s: ended_by %q, last_sample %+v", tc.name, e.EndedBy, e.LastSample)
		})
	}
}
