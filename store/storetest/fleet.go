package storetest

import (
	"context"
	"slices"
	"testing"

	"github.com/airlockhq/airlock"
)

// Two nodes of a fleet on one database: each reconciles only its own
// records, and marking one lost leaves the other's alone; lost is final.
func testNodeScopedRecords(t *testing.T, bk Backend) {
	ctx := context.Background()
	loc := bk.New(t)
	a, b, none := bk.OpenNode(t, loc, "a"), bk.OpenNode(t, loc, "b"), bk.OpenNode(t, loc, "")
	tn := mustTenant(t, a, "t")
	ids := map[string][]string{}
	for _, name := range []string{"a", "b", ""} {
		db := map[string]Store{"a": a, "b": b, "": none}[name]
		for i := 0; i < 2; i++ {
			s := newSession(tn.ID)
			if err := db.CreateSession(ctx, s); err != nil {
				t.Fatal(err)
			}
			ids[name] = append(ids[name], s.ID)
		}
		mustExecution(t, db, tn.ID)
	}
	for name, db := range map[string]Store{"a": a, "b": b, "": none} {
		live, err := db.LiveSessions(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, s := range live {
			got = append(got, s.ID)
		}
		slices.Sort(got)
		want := slices.Clone(ids[name])
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("node %q: live sessions %v, want its own %v", name, got, want)
		}
	}
	nodes, err := none.LiveSessionNodes(ctx)
	if err != nil || !slices.Equal(nodes, []string{"", "a", "b"}) {
		t.Fatalf("LiveSessionNodes = %v, %v", nodes, err)
	}
	if n, err := a.FailRunningExecutions(ctx, "restart"); err != nil || n != 1 {
		t.Fatalf("a fails %d running executions (%v); want its own 1", n, err)
	}
	ss, es, err := none.MarkNodeLost(ctx, "b", "node b left")
	if err != nil || ss != 2 || es != 1 {
		t.Fatalf("MarkNodeLost(b) = %d sessions, %d executions, %v; want 2, 1", ss, es, err)
	}
	for _, id := range ids["b"] {
		s, err := a.Session(ctx, tn.ID, id)
		if err != nil {
			t.Fatal(err)
		}
		if s.State != airlock.SessionLost || s.EndReason != airlock.EndNodeLost || s.EndDetail != "node b left" || s.EndedAt == nil {
			t.Errorf("b's session after the loss: %s %s %q %v", s.State, s.EndReason, s.EndDetail, s.EndedAt)
		}
		// Lost is final: the node coming back cannot write it live.
		s.State = airlock.SessionReady
		wantCode(t, "UpdateSession of a lost session", b.UpdateSession(ctx, s), airlock.ECONFLICT)
	}
	if ss, _, _ := none.MarkNodeLost(ctx, "b", "again"); ss != 0 {
		t.Errorf("marking b lost again changed %d sessions", ss)
	}
	if live, _ := a.LiveSessions(ctx); len(live) != 2 {
		t.Errorf("a's sessions after b's loss: %d live, want 2", len(live))
	}
	if nodes, _ := none.LiveSessionNodes(ctx); !slices.Equal(nodes, []string{"", "a"}) {
		t.Errorf("LiveSessionNodes after the loss = %v", nodes)
	}
	_, _, err = none.MarkNodeLost(ctx, "", "x")
	wantCode(t, "MarkNodeLost of no node", err, airlock.EINVALID)
}
