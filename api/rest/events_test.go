package rest_test

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/airlockhq/airlock"
)

// GET /v1/events lists the tenant's own abuse events, newest first, in
// pages; another tenant's never.
func TestListEvents(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	for i := 0; i < 5; i++ {
		ev := &airlock.AbuseEvent{TenantID: e.tenantA.ID, SessionID: fmt.Sprintf("s%d", i), Detector: airlock.DetectorMining,
			Summary: "busy", Evidence: map[string]any{"cpu_fraction": 0.97}, Action: airlock.ActionKilled}
		if err := e.store.RecordAbuseEvent(ctx, ev); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.store.RecordAbuseEvent(ctx, &airlock.AbuseEvent{TenantID: e.tenantB.ID, Detector: airlock.DetectorScanning, Action: airlock.ActionKilled}); err != nil {
		t.Fatal(err)
	}

	var got []string
	cursor := ""
	for pages := 0; ; pages++ {
		if pages > 5 {
			t.Fatal("pagination does not end")
		}
		var page airlock.AbuseEventPage
		decodeJSON(t, e.do(req{method: "GET", path: "/v1/events?limit=2&before=" + url.QueryEscape(cursor), key: e.keyA}), 200, &page)
		for _, ev := range page.Events {
			if ev.TenantID != e.tenantA.ID || ev.Detector != airlock.DetectorMining || ev.Evidence["cpu_fraction"] != 0.97 {
				t.Errorf("event %+v", ev)
			}
			got = append(got, ev.SessionID)
		}
		if page.NextCursor == "" {
			break
		}
		cursor = page.NextCursor
	}
	if fmt.Sprint(got) != "[s4 s3 s2 s1 s0]" {
		t.Errorf("sessions of the pages: %v, want newest first s4..s0", got)
	}

	var b airlock.AbuseEventPage
	decodeJSON(t, e.do(req{method: "GET", path: "/v1/events", key: e.keyB}), 200, &b)
	if len(b.Events) != 1 || b.Events[0].Detector != airlock.DetectorScanning {
		t.Errorf("tenant B sees %+v", b.Events)
	}

	for _, c := range []struct {
		path, problem string
		status        int
	}{
		{"/v1/events?limit=0", "invalid-limit", 400},
		{"/v1/events?limit=x", "invalid-limit", 400},
		{"/v1/events?before=nosuchevent", "invalid-cursor", 400},
	} {
		resp := e.do(req{method: "GET", path: c.path, key: e.keyA})
		wantProblem(t, resp, c.status, c.problem)
	}
	resp := e.do(req{method: "GET", path: "/v1/events"})
	if resp.StatusCode != 401 {
		t.Errorf("without a key: %d", resp.StatusCode)
	}
	resp.Body.Close()
}

// GET /v1/events?cursor= reads the feed oldest first or, with
// order=newest, newest first, the cursor then leading to older events;
// session_id keeps one session's events, never another tenant's under
// the same ID; a bad order is a problem; a revoked key is refused.
func TestEventFeedNewestAndSession(t *testing.T) {
	e, _ := newHooksEnv(t)
	ctx := context.Background()
	var ids []string
	for i, sid := range []string{"s1", "s2", "s1", "s2", "s1"} {
		ev := &airlock.Event{Type: airlock.EventSessionCreated, TenantID: e.tenantA.ID, SessionID: sid, Detail: fmt.Sprint(i)}
		if err := e.store.RecordEvent(ctx, ev); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, ev.ID)
	}
	other := &airlock.Event{Type: airlock.EventSessionCreated, TenantID: e.tenantB.ID, SessionID: "s1"}
	if err := e.store.RecordEvent(ctx, other); err != nil {
		t.Fatal(err)
	}
	read := func(key, query string) []string {
		t.Helper()
		var got []string
		cursor := ""
		for pages := 0; ; pages++ {
			if pages > 10 {
				t.Fatal("pagination does not end")
			}
			var page airlock.EventPage
			decodeJSON(t, e.do(req{method: "GET", path: "/v1/events?limit=2&cursor=" + url.QueryEscape(cursor) + query, key: key}), 200, &page)
			for _, ev := range page.Events {
				got = append(got, ev.ID)
			}
			if len(page.Events) < 2 {
				return got
			}
			cursor = page.NextCursor
		}
	}
	rev := func(s []string) []string {
		out := make([]string, len(s))
		for i, v := range s {
			out[len(s)-1-i] = v
		}
		return out
	}
	if got := read(e.keyA, ""); fmt.Sprint(got) != fmt.Sprint(ids) {
		t.Errorf("oldest first: %v, want %v", got, ids)
	}
	if got := read(e.keyA, "&order=oldest"); fmt.Sprint(got) != fmt.Sprint(ids) {
		t.Errorf("order=oldest: %v, want %v", got, ids)
	}
	if got := read(e.keyA, "&order=newest"); fmt.Sprint(got) != fmt.Sprint(rev(ids)) {
		t.Errorf("newest first: %v, want %v", got, rev(ids))
	}
	if got, want := read(e.keyA, "&order=newest&session_id=s1"), []string{ids[4], ids[2], ids[0]}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("s1 newest first: %v, want %v", got, want)
	}
	if got, want := read(e.keyA, "&session_id=s2"), []string{ids[1], ids[3]}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("s2 oldest first: %v, want %v", got, want)
	}
	if got := read(e.keyB, "&order=newest&session_id=s1"); fmt.Sprint(got) != fmt.Sprint([]string{other.ID}) {
		t.Errorf("B's s1: %v, want only B's own event", got)
	}
	for _, c := range []struct{ path, problem string }{
		{"/v1/events?cursor=&order=sideways", "invalid-filter"},
		{"/v1/events?cursor=&session_id=" + strings.Repeat("x", 1000), "invalid-filter"},
		{"/v1/events?cursor=" + url.QueryEscape(other.ID) + "&order=newest", "invalid-cursor"},
	} {
		wantProblem(t, e.do(req{method: "GET", path: c.path, key: e.keyA}), 400, c.problem)
	}
	revoked, _ := addTenantKey(t, e, e.tenantA)
	if _, err := e.store.RevokeAPIKey(ctx, e.keyID(revoked)); err != nil {
		t.Fatal(err)
	}
	if resp := e.do(req{method: "GET", path: "/v1/events?cursor=&order=newest", key: revoked}); resp.StatusCode != 401 {
		t.Errorf("a revoked key: %d, want 401", resp.StatusCode)
	}
}
