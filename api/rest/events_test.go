package rest_test

import (
	"context"
	"fmt"
	"net/url"
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
