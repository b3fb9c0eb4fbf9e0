package storetest

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
)

func testAbuseEvents(t *testing.T, bk Backend) {
	ctx := context.Background()
	db := bk.fresh(t)
	a, o := mustTenant(t, db, "a"), mustTenant(t, db, "other")
	var ids []string
	for i := range 5 {
		tenant := a.ID
		if i == 2 {
			tenant = o.ID
		}
		ev := &airlock.AbuseEvent{TenantID: tenant, SessionID: "s1", Detector: airlock.DetectorScanning,
			Action: airlock.ActionKilled, Summary: "scanned", Evidence: map[string]any{"ports": float64(100 + i)}}
		if err := db.RecordAbuseEvent(ctx, ev); err != nil {
			t.Fatal(err)
		}
		if ev.ID == "" || ev.Time.IsZero() {
			t.Fatalf("ID and Time not written back: %+v", ev)
		}
		ids = append(ids, ev.ID)
	}
	dup := &airlock.AbuseEvent{ID: ids[0], TenantID: a.ID, Detector: "x", Action: "y"}
	wantCode(t, "duplicate id", db.RecordAbuseEvent(ctx, dup), airlock.ECONFLICT)
	wantCode(t, "unknown tenant", db.RecordAbuseEvent(ctx, &airlock.AbuseEvent{TenantID: "nope", Detector: "x", Action: "y"}), airlock.ENOTFOUND)
	wantCode(t, "no detector", db.RecordAbuseEvent(ctx, &airlock.AbuseEvent{TenantID: a.ID, Action: "y"}), airlock.EINVALID)

	page, err := db.ListAbuseEvents(ctx, airlock.AbuseEventFilter{TenantID: a.ID, Limit: 2})
	if err != nil || len(page) != 2 || page[0].ID != ids[4] || page[1].ID != ids[3] {
		t.Fatalf("first page: %+v %v", page, err)
	}
	if !reflect.DeepEqual(page[0].Evidence, map[string]any{"ports": float64(104)}) || page[0].Summary != "scanned" || page[0].SessionID != "s1" {
		t.Errorf("event read back: %+v", page[0])
	}
	next, err := db.ListAbuseEvents(ctx, airlock.AbuseEventFilter{TenantID: a.ID, Before: page[1].ID})
	if err != nil || len(next) != 2 || next[0].ID != ids[1] || next[1].ID != ids[0] {
		t.Fatalf("second page: %+v %v", next, err)
	}
	all, err := db.ListAbuseEvents(ctx, airlock.AbuseEventFilter{})
	if err != nil || len(all) != 5 {
		t.Fatalf("every tenant's: %d %v", len(all), err)
	}
	_, err = db.ListAbuseEvents(ctx, airlock.AbuseEventFilter{TenantID: a.ID, Before: ids[2]})
	wantCode(t, "another tenant's cursor", err, airlock.EINVALID)
}

func testQuarantine(t *testing.T, bk Backend) {
	ctx := context.Background()
	db := bk.fresh(t)
	a := mustTenant(t, db, "a")
	if q, err := db.TenantQuarantine(ctx, a.ID); err != nil || q != nil {
		t.Fatalf("before: %+v %v", q, err)
	}
	since := time.Date(2026, 2, 3, 4, 5, 6, 7, time.UTC)
	for _, reason := range []string{"mining", "scanning"} {
		if err := db.QuarantineTenant(ctx, &airlock.Quarantine{TenantID: a.ID, Reason: reason, EventID: "ev-" + reason, Since: since}); err != nil {
			t.Fatal(err)
		}
	}
	q, err := db.TenantQuarantine(ctx, a.ID)
	if err != nil || q == nil || q.Reason != "scanning" || q.EventID != "ev-scanning" || !q.Since.Equal(since) {
		t.Fatalf("quarantine %+v %v", q, err)
	}
	wantCode(t, "unknown tenant", db.QuarantineTenant(ctx, &airlock.Quarantine{TenantID: "nope"}), airlock.ENOTFOUND)
	if lifted, err := db.UnquarantineTenant(ctx, a.ID); err != nil || !lifted {
		t.Fatalf("lift: %v %v", lifted, err)
	}
	if lifted, err := db.UnquarantineTenant(ctx, a.ID); err != nil || lifted {
		t.Fatalf("lift again: %v %v", lifted, err)
	}
	if q, err := db.TenantQuarantine(ctx, a.ID); err != nil || q != nil {
		t.Fatalf("after lift: %+v %v", q, err)
	}
}
