package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
)

func testEventFeed(t *testing.T, bk Backend) {
	ctx := context.Background()
	db := bk.fresh(t)
	a, b := mustTenant(t, db, "a"), mustTenant(t, db, "b")
	var aIDs []string
	for i, typ := range []string{airlock.EventSessionCreated, airlock.EventSessionPaused, airlock.EventSessionResumed, airlock.EventSessionEnded} {
		tenant := a.ID
		if i == 1 {
			// Tenant b's event between a's: a never sees it.
			if err := db.RecordEvent(ctx, &airlock.Event{Type: airlock.EventSessionCreated, TenantID: b.ID, SessionID: "sb"}); err != nil {
				t.Fatal(err)
			}
		}
		ev := &airlock.Event{Type: typ, TenantID: tenant, SessionID: "s1", Reason: "r", Data: map[string]any{"n": float64(i)}}
		if err := db.RecordEvent(ctx, ev); err != nil {
			t.Fatal(err)
		}
		if ev.ID == "" || ev.At.IsZero() {
			t.Fatalf("ID and At not written back: %+v", ev)
		}
		aIDs = append(aIDs, ev.ID)
	}
	// An abuse decision is in the feed too, under its own ID.
	ab := &airlock.AbuseEvent{TenantID: a.ID, SessionID: "s1", Detector: airlock.DetectorMining, Action: airlock.ActionKilled, Summary: "mined"}
	if err := db.RecordAbuseEvent(ctx, ab); err != nil {
		t.Fatal(err)
	}
	aIDs = append(aIDs, ab.ID)

	wantCode(t, "unknown type", db.RecordEvent(ctx, &airlock.Event{Type: "session.exploded", TenantID: a.ID}), airlock.EINVALID)
	wantCode(t, "unknown tenant", db.RecordEvent(ctx, &airlock.Event{Type: airlock.EventSessionCreated, TenantID: "nope"}), airlock.ENOTFOUND)

	first, err := db.ListEvents(ctx, airlock.EventFilter{TenantID: a.ID, Limit: 2})
	if err != nil || len(first) != 2 || first[0].ID != aIDs[0] || first[1].ID != aIDs[1] {
		t.Fatalf("first page: %+v %v", first, err)
	}
	if first[1].Type != airlock.EventSessionPaused || first[1].SessionID != "s1" || first[1].Reason != "r" || first[1].Data["n"] != float64(1) {
		t.Errorf("event read back: %+v", first[1])
	}
	rest, err := db.ListEvents(ctx, airlock.EventFilter{TenantID: a.ID, After: first[1].ID})
	if err != nil || len(rest) != 3 || rest[0].ID != aIDs[2] || rest[2].ID != ab.ID || rest[2].Type != airlock.EventAbuseDetected {
		t.Fatalf("rest: %+v %v", rest, err)
	}
	end, err := db.ListEvents(ctx, airlock.EventFilter{TenantID: a.ID, After: ab.ID})
	if err != nil || len(end) != 0 {
		t.Fatalf("after the last: %+v %v", end, err)
	}
	all, err := db.ListEvents(ctx, airlock.EventFilter{})
	if err != nil || len(all) != 6 {
		t.Fatalf("every tenant's: %d %v", len(all), err)
	}
	bs, err := db.ListEvents(ctx, airlock.EventFilter{TenantID: b.ID})
	if err != nil || len(bs) != 1 || bs[0].TenantID != b.ID {
		t.Fatalf("b's: %+v %v", bs, err)
	}
	_, err = db.ListEvents(ctx, airlock.EventFilter{TenantID: b.ID, After: aIDs[0]})
	wantCode(t, "another tenant's cursor", err, airlock.EINVALID)
	// Newest first: the cursor reads the events before it.
	newest, err := db.ListEvents(ctx, airlock.EventFilter{TenantID: a.ID, Newest: true, Limit: 2})
	if err != nil || len(newest) != 2 || newest[0].ID != ab.ID || newest[1].ID != aIDs[3] {
		t.Fatalf("newest first: %+v %v", newest, err)
	}
	older, err := db.ListEvents(ctx, airlock.EventFilter{TenantID: a.ID, Newest: true, After: newest[1].ID})
	if err != nil || len(older) != 3 || older[0].ID != aIDs[2] || older[2].ID != aIDs[0] {
		t.Fatalf("older: %+v %v", older, err)
	}
	if none, err := db.ListEvents(ctx, airlock.EventFilter{TenantID: a.ID, Newest: true, After: aIDs[0]}); err != nil || len(none) != 0 {
		t.Fatalf("before the oldest: %+v %v", none, err)
	}
	_, err = db.ListEvents(ctx, airlock.EventFilter{TenantID: b.ID, Newest: true, After: aIDs[0]})
	wantCode(t, "another tenant's cursor, newest first", err, airlock.EINVALID)
	// One session's: a's s2 only; b's session is not a's, whatever its ID.
	s2 := &airlock.Event{Type: airlock.EventSessionCreated, TenantID: a.ID, SessionID: "s2"}
	if err := db.RecordEvent(ctx, s2); err != nil {
		t.Fatal(err)
	}
	for _, newestFirst := range []bool{false, true} {
		got, err := db.ListEvents(ctx, airlock.EventFilter{TenantID: a.ID, SessionID: "s2", Newest: newestFirst})
		if err != nil || len(got) != 1 || got[0].ID != s2.ID {
			t.Errorf("session s2 (newest first %v): %+v %v", newestFirst, got, err)
		}
		got, err = db.ListEvents(ctx, airlock.EventFilter{TenantID: a.ID, SessionID: "sb", Newest: newestFirst})
		if err != nil || len(got) != 0 {
			t.Errorf("b's session through a (newest first %v): %+v %v", newestFirst, got, err)
		}
	}
	// A cursor of another session of the tenant's is a place in the feed.
	s1, err := db.ListEvents(ctx, airlock.EventFilter{TenantID: a.ID, SessionID: "s1", Newest: true, After: s2.ID, Limit: 1})
	if err != nil || len(s1) != 1 || s1[0].ID != ab.ID {
		t.Errorf("s1 before s2's event: %+v %v", s1, err)
	}
	if ev, err := db.Event(ctx, aIDs[3]); err != nil || ev.Type != airlock.EventSessionEnded {
		t.Errorf("Event: %+v %v", ev, err)
	}
	_, err = db.Event(ctx, "nope")
	wantCode(t, "missing event", err, airlock.ENOTFOUND)
}

func testWebhookQueue(t *testing.T, bk Backend) {
	ctx := context.Background()
	loc := bk.New(t)
	db := bk.Open(t, loc, newClock().Now)
	a, b := mustTenant(t, db, "a"), mustTenant(t, db, "b")
	all := &airlock.Webhook{TenantID: a.ID, URL: "https://example.com/all", SealedSecret: []byte{1}, KeyID: "k"}
	ended := &airlock.Webhook{TenantID: a.ID, URL: "https://example.com/ended", Events: []string{airlock.EventSessionEnded}, SealedSecret: []byte{1}, KeyID: "k"}
	other := &airlock.Webhook{TenantID: b.ID, URL: "https://example.com/b", SealedSecret: []byte{2}, KeyID: "k"}
	for _, w := range []*airlock.Webhook{all, ended, other} {
		if err := db.CreateWebhook(ctx, w); err != nil {
			t.Fatal(err)
		}
	}
	wantCode(t, "unknown tenant", db.CreateWebhook(ctx, &airlock.Webhook{TenantID: "nope", URL: "https://x", SealedSecret: []byte{1}, KeyID: "k"}), airlock.ENOTFOUND)
	if n, err := db.CountWebhooks(ctx, a.ID); err != nil || n != 2 {
		t.Fatalf("count: %d %v", n, err)
	}
	list, err := db.ListWebhooks(ctx, a.ID)
	if err != nil || len(list) != 2 || list[0].ID != all.ID || len(list[0].Events) != 0 || list[1].Events[0] != airlock.EventSessionEnded {
		t.Fatalf("list: %+v %v", list, err)
	}
	_, err = db.Webhook(ctx, b.ID, all.ID)
	wantCode(t, "another tenant's webhook", err, airlock.ENOTFOUND)

	created := &airlock.Event{Type: airlock.EventSessionCreated, TenantID: a.ID, SessionID: "s1"}
	end := &airlock.Event{Type: airlock.EventSessionEnded, TenantID: a.ID, SessionID: "s1"}
	for _, ev := range []*airlock.Event{created, end} {
		if err := db.RecordEvent(ctx, ev); err != nil {
			t.Fatal(err)
		}
	}
	// all takes both, ended the end only, b's none of a's.
	ds, err := db.ListDeliveries(ctx, a.ID, all.ID, "", 10)
	if err != nil || len(ds) != 2 || ds[0].EventID != end.ID || ds[1].EventID != created.ID || ds[0].State != airlock.DeliveryPending {
		t.Fatalf("all's deliveries: %+v %v", ds, err)
	}
	if ds, err := db.ListDeliveries(ctx, a.ID, ended.ID, "", 10); err != nil || len(ds) != 1 || ds[0].EventType != airlock.EventSessionEnded {
		t.Fatalf("ended's deliveries: %+v %v", ds, err)
	}
	if ds, err := db.ListDeliveries(ctx, b.ID, other.ID, "", 10); err != nil || len(ds) != 0 {
		t.Fatalf("b's deliveries: %+v %v", ds, err)
	}
	_, err = db.ListDeliveries(ctx, b.ID, all.ID, "", 10)
	wantCode(t, "another tenant's deliveries", err, airlock.ENOTFOUND)

	// Two handles (two nodes) claim at once: each delivery goes to one.
	db2 := bk.Open(t, loc, time.Now)
	now := time.Now().Add(time.Hour)
	c1, err1 := db.ClaimDeliveries(ctx, "n1", now, time.Minute, 10)
	c2, err2 := db2.ClaimDeliveries(ctx, "n2", now, time.Minute, 10)
	if err1 != nil || err2 != nil || len(c1)+len(c2) != 3 {
		t.Fatalf("claims: %d %v, %d %v", len(c1), err1, len(c2), err2)
	}
	if again, err := db.ClaimDeliveries(ctx, "n1", now, time.Minute, 10); err != nil || len(again) != 0 {
		t.Fatalf("claimed twice: %+v %v", again, err)
	}
	claimed := append(c1, c2...)
	first := claimed[0]
	next := now.Add(time.Second)
	if err := db.FinishAttempt(ctx, airlock.DeliveryAttempt{DeliveryID: first.ID, Status: 500, Error: "boom", State: airlock.DeliveryPending, NextAt: &next, At: now}); err != nil {
		t.Fatal(err)
	}
	for _, d := range claimed[1:] {
		if err := db.FinishAttempt(ctx, airlock.DeliveryAttempt{DeliveryID: d.ID, Status: 204, State: airlock.DeliveryDelivered, At: now}); err != nil {
			t.Fatal(err)
		}
	}
	if c, err := db.ClaimDeliveries(ctx, "n1", now, time.Minute, 10); err != nil || len(c) != 0 {
		t.Fatalf("claimed before it is due: %+v %v", c, err)
	}
	c, err := db.ClaimDeliveries(ctx, "n1", next, time.Minute, 10)
	if err != nil || len(c) != 1 || c[0].ID != first.ID || c[0].Attempts != 1 || c[0].LastStatus != 500 || c[0].LastError != "boom" {
		t.Fatalf("retry claim: %+v %v", c, err)
	}
	if err := db.FinishAttempt(ctx, airlock.DeliveryAttempt{DeliveryID: first.ID, Status: 200, State: airlock.DeliveryDelivered, At: next}); err != nil {
		t.Fatal(err)
	}
	d, err := db.ReplayDelivery(ctx, a.ID, first.WebhookID, first.ID, next)
	if err != nil || d.State != airlock.DeliveryPending || d.Attempts != 2 || d.DeliveredAt == nil {
		t.Fatalf("replay: %+v %v", d, err)
	}
	_, err = db.ReplayDelivery(ctx, b.ID, first.WebhookID, first.ID, next)
	wantCode(t, "another tenant's replay", err, airlock.ENOTFOUND)
	if c, err := db.ClaimDeliveries(ctx, "n2", next, time.Minute, 10); err != nil || len(c) != 1 || c[0].ID != first.ID {
		t.Fatalf("replayed claim: %+v %v", c, err)
	}

	wantCode(t, "another tenant's delete", db.DeleteWebhook(ctx, b.ID, all.ID), airlock.ENOTFOUND)
	if err := db.DeleteWebhook(ctx, a.ID, all.ID); err != nil {
		t.Fatal(err)
	}
	_, err = db.ListDeliveries(ctx, a.ID, all.ID, "", 10)
	wantCode(t, "deleted webhook's deliveries", err, airlock.ENOTFOUND)
}

func testSessionLifecycleStored(t *testing.T, bk Backend) {
	ctx := context.Background()
	db := bk.fresh(t)
	a := mustTenant(t, db, "a")
	plain := newSession(a.ID)
	paused := newSession(a.ID)
	paused.Lifecycle = airlock.SessionLifecycle{OnTimeout: airlock.OnTimeoutPause, AutoResume: true}
	for _, s := range []*airlock.Session{plain, paused} {
		if err := db.CreateSession(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := db.Session(ctx, a.ID, plain.ID); err != nil || got.Lifecycle != (airlock.SessionLifecycle{OnTimeout: airlock.OnTimeoutEnd}) {
		t.Errorf("default lifecycle: %+v %v", got, err)
	}
	if got, err := db.Session(ctx, a.ID, paused.ID); err != nil || got.Lifecycle != paused.Lifecycle {
		t.Errorf("pause lifecycle: %+v %v", got, err)
	}
	p := &airlock.SessionPause{SessionID: paused.ID, TenantID: a.ID, Dir: "/x", Backend: "gvisor", PausedAt: time.Now(), Bytes: 12345}
	if err := db.PutPause(ctx, p); err != nil {
		t.Fatal(err)
	}
	if got, err := db.Pause(ctx, a.ID, paused.ID); err != nil || got.Bytes != 12345 {
		t.Errorf("pause bytes: %+v %v", got, err)
	}
}

// Events and webhook deliveries older than the retention are pruned; a
// reader whose cursor was pruned reads on from the oldest kept.
func testPruneEvents(t *testing.T, bk Backend) {
	ctx := context.Background()
	db := bk.fresh(t)
	a, b := mustTenant(t, db, "a"), mustTenant(t, db, "b")
	hook := &airlock.Webhook{TenantID: a.ID, URL: "https://example.com/all", SealedSecret: []byte{1}, KeyID: "k"}
	if err := db.CreateWebhook(ctx, hook); err != nil {
		t.Fatal(err)
	}
	var evs []*airlock.Event
	for _, typ := range []string{airlock.EventSessionCreated, airlock.EventSessionEnded, airlock.EventSessionCreated} {
		ev := &airlock.Event{Type: typ, TenantID: a.ID, SessionID: "s1"}
		if err := db.RecordEvent(ctx, ev); err != nil {
			t.Fatal(err)
		}
		evs = append(evs, ev)
	}
	other := &airlock.Event{Type: airlock.EventSessionCreated, TenantID: b.ID, SessionID: "sb"}
	if err := db.RecordEvent(ctx, other); err != nil {
		t.Fatal(err)
	}
	// The clock moves on every reading: the third event and its delivery
	// are newer than the first two.
	n, err := db.PruneEvents(ctx, evs[2].At)
	if err != nil || n.Events != 2 || n.Deliveries != 2 {
		t.Fatalf("prune: %+v %v, want 2 events and 2 deliveries", n, err)
	}
	if n, err := db.PruneEvents(ctx, evs[2].At); err != nil || n.Events != 0 || n.Deliveries != 0 {
		t.Fatalf("prune again: %+v %v, want nothing", n, err)
	}
	kept, err := db.ListEvents(ctx, airlock.EventFilter{TenantID: a.ID})
	if err != nil || len(kept) != 1 || kept[0].ID != evs[2].ID {
		t.Fatalf("kept: %+v %v", kept, err)
	}
	ds, err := db.ListDeliveries(ctx, a.ID, hook.ID, "", 10)
	if err != nil || len(ds) != 1 || ds[0].EventID != evs[2].ID {
		t.Fatalf("deliveries kept: %+v %v", ds, err)
	}
	if _, err := db.Event(ctx, evs[0].ID); airlock.ErrorCode(err) != airlock.ENOTFOUND {
		t.Errorf("a pruned event: %v", err)
	}
	// A cursor whose event was pruned reads on from the oldest kept.
	after, err := db.ListEvents(ctx, airlock.EventFilter{TenantID: a.ID, After: evs[0].ID})
	if err != nil || len(after) != 1 || after[0].ID != evs[2].ID {
		t.Fatalf("after a pruned cursor: %+v %v", after, err)
	}
	// Newest first, there is nothing older than a pruned cursor.
	if before, err := db.ListEvents(ctx, airlock.EventFilter{TenantID: a.ID, After: evs[0].ID, Newest: true}); err != nil || len(before) != 0 {
		t.Fatalf("before a pruned cursor: %+v %v", before, err)
	}
	// Another tenant's kept event, and what is no event ID, stay refused.
	_, err = db.ListEvents(ctx, airlock.EventFilter{TenantID: a.ID, After: other.ID})
	wantCode(t, "another tenant's cursor", err, airlock.EINVALID)
	_, err = db.ListEvents(ctx, airlock.EventFilter{TenantID: a.ID, After: "nope"})
	wantCode(t, "no event ID", err, airlock.EINVALID)
	// Everything goes: a well-formed cursor then reads from the start.
	if n, err := db.PruneEvents(ctx, time.Now().Add(time.Hour*24*365*10)); err != nil || n.Events != 2 || n.Deliveries != 1 {
		t.Fatalf("prune all: %+v %v", n, err)
	}
	if after, err := db.ListEvents(ctx, airlock.EventFilter{TenantID: a.ID, After: evs[2].ID}); err != nil || len(after) != 0 {
		t.Fatalf("after everything was pruned: %+v %v", after, err)
	}
}

// testLastSessionEvents: each of the node's live sessions, and each that
// ended since the given time, comes with its newest event's type ("" for
// none, another tenant's event of the same session ID not counted); one
// that ended before is left out.
func testLastSessionEvents(t *testing.T, bk Backend) {
	ctx := context.Background()
	db := bk.fresh(t)
	a, b := mustTenant(t, db, "a"), mustTenant(t, db, "b")
	now := time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)
	mk := func(state airlock.SessionState, endedAt *time.Time) *airlock.Session {
		t.Helper()
		s := newSession(a.ID)
		if err := db.CreateSession(ctx, s); err != nil {
			t.Fatal(err)
		}
		s.State, s.EndedAt = state, endedAt
		if state.Final() {
			s.EndReason = airlock.EndDeleted
		}
		if err := db.UpdateSession(ctx, s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	recent, old := now.Add(-time.Hour), now.Add(-48*time.Hour)
	ready := mk(airlock.SessionReady, nil)
	paused := mk(airlock.SessionPaused, nil)
	ended := mk(airlock.SessionDestroyed, &recent)
	gone := mk(airlock.SessionDestroyed, &old)
	for _, ev := range []*airlock.Event{
		{Type: airlock.EventSessionCreated, TenantID: a.ID, SessionID: ready.ID},
		{Type: airlock.EventSessionCreated, TenantID: a.ID, SessionID: paused.ID},
		{Type: airlock.EventSessionPaused, TenantID: a.ID, SessionID: paused.ID},
		{Type: airlock.EventSessionEnded, TenantID: b.ID, SessionID: ended.ID},
		{Type: airlock.EventSessionCreated, TenantID: a.ID, SessionID: gone.ID},
	} {
		if err := db.RecordEvent(ctx, ev); err != nil {
			t.Fatal(err)
		}
	}
	got, err := db.LastSessionEvents(ctx, now.Add(-24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	last := map[string]string{}
	for _, g := range got {
		if g.Session == nil || g.Session.TenantID != a.ID {
			t.Fatalf("entry %+v", g)
		}
		last[g.Session.ID] = g.LastType
	}
	want := map[string]string{ready.ID: airlock.EventSessionCreated, paused.ID: airlock.EventSessionPaused, ended.ID: ""}
	if len(last) != len(want) {
		t.Fatalf("got %v, want %v", last, want)
	}
	for id, typ := range want {
		if l, ok := last[id]; !ok || l != typ {
			t.Errorf("session %s: last %q (listed %v), want %q", id, l, ok, typ)
		}
	}
}
