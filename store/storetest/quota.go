package storetest

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
)

func testTenantQuotas(t *testing.T, bk Backend) {
	ctx := context.Background()
	db := bk.fresh(t)
	a, b := mustTenant(t, db, "a"), mustTenant(t, db, "b")
	for _, s := range []struct {
		tenant, quota string
		limit         int64
	}{{a.ID, "sessions", 2}, {a.ID, "vcpu", 4000}, {b.ID, "sessions", -1}, {a.ID, "sessions", 3}} {
		if err := db.SetTenantQuota(ctx, s.tenant, s.quota, s.limit); err != nil {
			t.Fatal(err)
		}
	}
	wantCode(t, "unknown tenant", db.SetTenantQuota(ctx, "nope", "sessions", 1), airlock.ENOTFOUND)
	wantCode(t, "limit -2", db.SetTenantQuota(ctx, a.ID, "sessions", -2), airlock.EINVALID)
	wantCode(t, "no name", db.SetTenantQuota(ctx, a.ID, "", 1), airlock.EINVALID)
	got, err := db.TenantQuotas(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]map[string]int64{a.ID: {"sessions": 3, "vcpu": 4000}, b.ID: {"sessions": -1}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("quotas %v, want %v", got, want)
	}
	if err := db.DeleteTenantQuota(ctx, a.ID, "vcpu"); err != nil {
		t.Fatal(err)
	}
	if err := db.DeleteTenantQuota(ctx, a.ID, "vcpu"); err != nil {
		t.Errorf("dropping one not set: %v", err)
	}
	got, _ = db.TenantQuotas(ctx)
	if _, ok := got[a.ID]["vcpu"]; ok || got[a.ID]["sessions"] != 3 {
		t.Errorf("after delete: %v", got)
	}
}

func testDailyUsage(t *testing.T, bk Backend) {
	ctx := context.Background()
	db := bk.fresh(t)
	a, b := mustTenant(t, db, "a"), mustTenant(t, db, "b")
	add := func(d ...airlock.UsageDelta) {
		t.Helper()
		if err := db.AddUsage(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	add(airlock.UsageDelta{TenantID: a.ID, Day: "2026-03-04", DailyUsage: airlock.DailyUsage{SandboxMillis: 1000, EgressBytes: 10}},
		airlock.UsageDelta{TenantID: b.ID, Day: "2026-03-04", DailyUsage: airlock.DailyUsage{SandboxMillis: 5}})
	add(airlock.UsageDelta{TenantID: a.ID, Day: "2026-03-04", DailyUsage: airlock.DailyUsage{SandboxMillis: 500, EgressBytes: 1}},
		airlock.UsageDelta{TenantID: a.ID, Day: "2026-03-05", DailyUsage: airlock.DailyUsage{SandboxMillis: 7}},
		// A tenant that is gone: dropped, the rest written.
		airlock.UsageDelta{TenantID: "gone", Day: "2026-03-04", DailyUsage: airlock.DailyUsage{SandboxMillis: 7}})
	add()
	got, err := db.DailyUsage(ctx, "2026-03-04")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]airlock.DailyUsage{a.ID: {SandboxMillis: 1500, EgressBytes: 11}, b.ID: {SandboxMillis: 5}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("usage %v, want %v", got, want)
	}
	// All or none: a bad delta writes nothing.
	err = db.AddUsage(ctx, []airlock.UsageDelta{{TenantID: a.ID, Day: "2026-03-04", DailyUsage: airlock.DailyUsage{SandboxMillis: 1}}, {TenantID: a.ID, Day: "2026-03-04", DailyUsage: airlock.DailyUsage{SandboxMillis: -1}}})
	wantCode(t, "negative", err, airlock.EINVALID)
	if got, _ := db.DailyUsage(ctx, "2026-03-04"); got[a.ID].SandboxMillis != 1500 {
		t.Errorf("a refused batch was written in part: %v", got[a.ID])
	}
	if got, _ := db.DailyUsage(ctx, "2026-03-06"); len(got) != 0 {
		t.Errorf("empty day: %v", got)
	}
}

func testExecutionCounts(t *testing.T, bk Backend) {
	ctx := context.Background()
	db := bk.fresh(t)
	a, b := mustTenant(t, db, "a"), mustTenant(t, db, "b")
	t0 := time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)
	mk := func(tenant, session string, at time.Time, finish bool) {
		t.Helper()
		e := &airlock.Execution{TenantID: tenant, SessionID: session, Language: airlock.Bash, CreatedAt: at}
		if err := db.CreateExecution(ctx, e); err != nil {
			t.Fatal(err)
		}
		if finish {
			e.Status = airlock.StatusCompleted
			if err := db.FinishExecution(ctx, e); err != nil {
				t.Fatal(err)
			}
		}
	}
	mk(a.ID, "", t0, false)                    // running one-shot, old
	mk(a.ID, "", t0.Add(time.Minute), false)   // running one-shot, recent
	mk(a.ID, "s1", t0.Add(time.Minute), false) // running session exec: not a one-shot
	mk(a.ID, "", t0.Add(2*time.Minute), true)  // finished, recent
	mk(b.ID, "s2", t0.Add(-time.Hour), true)   // nothing to count
	got, err := db.ExecutionCounts(ctx, t0.Add(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]airlock.ExecutionCounts{a.ID: {RunningOneShot: 2, Since: 3}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("counts %+v, want %+v", got, want)
	}
}
