package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
)

// Samples are kept per tenant and session, read back oldest first within
// the bounds, and pruned by age.
func testSessionSamples(t *testing.T, bk Backend) {
	ctx := context.Background()
	db := bk.fresh(t)
	a, b := mustTenant(t, db, "acme"), mustTenant(t, db, "other")
	t0 := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	for i := range 5 {
		s := airlock.MetricSample{At: t0.Add(time.Duration(i) * 5 * time.Second), CPUPct: 12.34 * float64(i),
			MemoryBytes: int64(i) << 20, DiskBytes: int64(i) << 10, NetRxBytes: int64(i * 100), NetTxBytes: int64(i * 10)}
		if err := db.AddSessionSample(ctx, a.ID, "s1", s); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.AddSessionSample(ctx, b.ID, "s1", airlock.MetricSample{At: t0, MemoryBytes: 99}); err != nil {
		t.Fatal(err)
	}
	wantCode(t, "AddSessionSample(no time)", db.AddSessionSample(ctx, a.ID, "s1", airlock.MetricSample{}), airlock.EINVALID)
	wantCode(t, "AddSessionSample(missing tenant)", db.AddSessionSample(ctx, "nope", "s1", airlock.MetricSample{At: t0}), airlock.ENOTFOUND)

	all, err := db.SessionSamples(ctx, airlock.MetricsFilter{TenantID: a.ID, SessionID: "s1"})
	if err != nil || len(all) != 5 {
		t.Fatalf("all samples: %d %v", len(all), err)
	}
	if got := all[2]; !got.At.Equal(t0.Add(10*time.Second)) || got.CPUPct != 24.68 || got.MemoryBytes != 2<<20 ||
		got.DiskBytes != 2<<10 || got.NetRxBytes != 200 || got.NetTxBytes != 20 {
		t.Errorf("sample 2 read back as %+v", got)
	}
	for i := 1; i < len(all); i++ {
		if !all[i].At.After(all[i-1].At) {
			t.Fatalf("samples not oldest first: %v", all)
		}
	}
	for _, tt := range []struct {
		name       string
		start, end time.Time
		limit      int
		want       int
	}{
		{"start", t0.Add(10 * time.Second), time.Time{}, 0, 3},
		{"end", time.Time{}, t0.Add(5 * time.Second), 0, 2},
		{"both", t0.Add(5 * time.Second), t0.Add(15 * time.Second), 0, 3},
		{"empty", t0.Add(time.Hour), time.Time{}, 0, 0},
		{"limit", time.Time{}, time.Time{}, 2, 2},
	} {
		got, err := db.SessionSamples(ctx, airlock.MetricsFilter{TenantID: a.ID, SessionID: "s1", Start: tt.start, End: tt.end, Limit: tt.limit})
		if err != nil || len(got) != tt.want {
			t.Errorf("%s: %d samples, %v; want %d", tt.name, len(got), err, tt.want)
		}
	}
	other, err := db.SessionSamples(ctx, airlock.MetricsFilter{TenantID: b.ID, SessionID: "s1"})
	if err != nil || len(other) != 1 || other[0].MemoryBytes != 99 {
		t.Errorf("the other tenant's samples: %+v %v", other, err)
	}
	if _, err := db.SessionSamples(ctx, airlock.MetricsFilter{TenantID: a.ID}); airlock.ErrorCode(err) != airlock.EINVALID {
		t.Errorf("samples without a session: %v", err)
	}

	// A live session's samples stay however old; once it has ended
	// they go when they are older than the cut and it ended before it.
	live := &airlock.Session{TenantID: a.ID, Image: "python", Size: airlock.SizeSmall}
	if err := db.CreateSession(ctx, live); err != nil {
		t.Fatal(err)
	}
	if err := db.AddSessionSample(ctx, a.ID, live.ID, airlock.MetricSample{At: t0, MemoryBytes: 1}); err != nil {
		t.Fatal(err)
	}
	n, err := db.DeleteSessionSamplesBefore(ctx, t0.Add(10*time.Second))
	if err != nil || n != 3 { // two of acme's and other's one (s1 has no record)
		t.Fatalf("DeleteSessionSamplesBefore: %d %v", n, err)
	}
	if got, err := db.SessionSamples(ctx, airlock.MetricsFilter{TenantID: a.ID, SessionID: live.ID}); err != nil || len(got) != 1 {
		t.Fatalf("a live session's old sample was pruned: %v %v", got, err)
	}
	left, err := db.SessionSamples(ctx, airlock.MetricsFilter{TenantID: a.ID, SessionID: "s1"})
	if err != nil || len(left) != 3 || !left[0].At.Equal(t0.Add(10*time.Second)) {
		t.Errorf("after pruning: %+v %v", left, err)
	}
}
