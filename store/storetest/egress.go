package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
)

func testEgressLog(t *testing.T, bk Backend) {
	db := bk.fresh(t)
	ctx := context.Background()
	a, b := mustTenant(t, db, "a"), mustTenant(t, db, "b")
	var evs []*airlock.EgressEvent
	for i := 0; i < 5; i++ {
		evs = append(evs, &airlock.EgressEvent{TenantID: a.ID, SessionID: "s1", Time: time.Unix(int64(i), 0), Kind: airlock.EgressConnection,
			Name: "api.test", Port: 443, SNI: "api.test", Verdict: airlock.VerdictAllowed, BytesUp: 10, BytesDown: 20, Flags: []string{"x", "y"}})
	}
	evs[3].Verdict, evs[3].Reason = airlock.VerdictDenied, "not-in-allow-list"
	evs = append(evs, &airlock.EgressEvent{TenantID: a.ID, ExecutionID: "e1", Time: time.Unix(9, 0), Kind: airlock.EgressDNS, Verdict: airlock.VerdictDenied})
	if err := db.RecordEgress(ctx, evs); err != nil {
		t.Fatal(err)
	}
	if evs[0].Seq == 0 || evs[4].Seq <= evs[0].Seq {
		t.Fatalf("seq not written back: %d %d", evs[0].Seq, evs[4].Seq)
	}
	page, err := db.ListEgress(ctx, airlock.EgressFilter{TenantID: a.ID, SessionID: "s1", Limit: 2})
	if err != nil || len(page) != 2 || page[0].Seq != evs[4].Seq || page[0].Flags[1] != "y" || page[0].BytesDown != 20 {
		t.Fatalf("first page: %+v %v", page, err)
	}
	next, err := db.ListEgress(ctx, airlock.EgressFilter{TenantID: a.ID, SessionID: "s1", Limit: 10, Before: page[1].Seq})
	if err != nil || len(next) != 3 {
		t.Fatalf("next page: %d %v", len(next), err)
	}
	denied, _ := db.ListEgress(ctx, airlock.EgressFilter{TenantID: a.ID, SessionID: "s1", Verdict: airlock.VerdictDenied})
	if len(denied) != 1 || denied[0].Reason != "not-in-allow-list" {
		t.Errorf("verdict filter: %+v", denied)
	}
	if other, _ := db.ListEgress(ctx, airlock.EgressFilter{TenantID: b.ID, SessionID: "s1"}); len(other) != 0 {
		t.Errorf("another tenant sees %d events", len(other))
	}
	if ex, _ := db.ListEgress(ctx, airlock.EgressFilter{TenantID: a.ID, ExecutionID: "e1", Kind: airlock.EgressDNS}); len(ex) != 1 {
		t.Errorf("execution log: %d events", len(ex))
	}
	if _, err := db.ListEgress(ctx, airlock.EgressFilter{TenantID: a.ID}); airlock.ErrorCode(err) != airlock.EINVALID {
		t.Errorf("no owner: %v", err)
	}
	if err := db.RecordEgress(ctx, []*airlock.EgressEvent{{TenantID: "nope", Kind: "dns", Verdict: "denied", Time: time.Now()}}); airlock.ErrorCode(err) != airlock.ENOTFOUND {
		t.Errorf("unknown tenant: %v", err)
	}
}

func testSessionBrokerScopesStored(t *testing.T, bk Backend) {
	db := bk.fresh(t)
	ctx := context.Background()
	tn := mustTenant(t, db, "a")
	s := &airlock.Session{TenantID: tn.ID, Image: "base", Size: airlock.SizeSmall, BrokerScopes: []string{"tickets.read"},
		Network: airlock.NetworkPolicy{Mode: airlock.NetworkAllowList, Allow: []string{"api.test"}}}
	if err := db.CreateSession(ctx, s); err != nil {
		t.Fatal(err)
	}
	got, err := db.Session(ctx, tn.ID, s.ID)
	if err != nil || len(got.BrokerScopes) != 1 || got.BrokerScopes[0] != "tickets.read" || got.Network.Allow[0] != "api.test" {
		t.Fatalf("got %+v %v", got, err)
	}
}
