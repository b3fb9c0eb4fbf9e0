package rest_test

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/client"
)

// TestExecutionEgress reads a one-shot run's egress log through the Go
// client and the route: the run's own events only, newest first, filtered
// and paged like a session's; another tenant's run is not found.
func TestExecutionEgress(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	runA := e.execute(e.keyA, okBody)["execution_id"].(string)
	quiet := e.execute(e.keyA, okBody)["execution_id"].(string)
	runB := e.execute(e.keyB, okBody)["execution_id"].(string)

	now := time.Now().UTC()
	ev := func(tenant, exec, session, kind, verdict, name string) *airlock.EgressEvent {
		now = now.Add(time.Millisecond)
		return &airlock.EgressEvent{TenantID: tenant, ExecutionID: exec, SessionID: session, Time: now,
			Kind: kind, Verdict: verdict, Name: name, Port: 443}
	}
	if err := e.store.RecordEgress(ctx, []*airlock.EgressEvent{
		ev(e.tenantA.ID, runA, "", airlock.EgressDNS, airlock.VerdictAllowed, "api.test"),
		ev(e.tenantA.ID, runA, "", airlock.EgressConnection, airlock.VerdictAllowed, "api.test"),
		ev(e.tenantA.ID, runA, "", airlock.EgressConnection, airlock.VerdictDenied, "other.test"),
		ev(e.tenantA.ID, runA, "", airlock.EgressConnection, airlock.VerdictDenied, "evil.test"),
		ev(e.tenantA.ID, "", "s-of-a", airlock.EgressConnection, airlock.VerdictDenied, "session.test"),
		ev(e.tenantB.ID, runB, "", airlock.EgressConnection, airlock.VerdictDenied, "b.test"),
	}); err != nil {
		t.Fatal(err)
	}
	a, err := client.New(client.Config{BaseURL: e.srv.URL, APIKey: e.keyA})
	if err != nil {
		t.Fatal(err)
	}
	names := func(p *airlock.EgressPage) []string {
		var out []string
		for _, ev := range p.Events {
			out = append(out, ev.Name+"/"+ev.Verdict)
		}
		return out
	}
	for _, c := range []struct {
		name string
		id   string
		f    airlock.EgressFilter
		want []string
		next bool
	}{
		{"all", runA, airlock.EgressFilter{}, []string{"evil.test/denied", "other.test/denied", "api.test/allowed", "api.test/allowed"}, false},
		{"denied", runA, airlock.EgressFilter{Verdict: airlock.VerdictDenied}, []string{"evil.test/denied", "other.test/denied"}, false},
		{"dns", runA, airlock.EgressFilter{Kind: airlock.EgressDNS}, []string{"api.test/allowed"}, false},
		{"allowed connections", runA, airlock.EgressFilter{Kind: airlock.EgressConnection, Verdict: airlock.VerdictAllowed}, []string{"api.test/allowed"}, false},
		{"first page", runA, airlock.EgressFilter{Limit: 3}, []string{"evil.test/denied", "other.test/denied", "api.test/allowed"}, true},
		{"no network", quiet, airlock.EgressFilter{}, nil, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, err := a.ExecutionEgress(ctx, c.id, c.f)
			if err != nil {
				t.Fatal(err)
			}
			if got := names(p); !slices.Equal(got, c.want) || (p.NextCursor != "") != c.next {
				t.Errorf("events %v (next %q), want %v (next %v)", got, p.NextCursor, c.want, c.next)
			}
			if p.Events == nil {
				t.Errorf("events is null, want []")
			}
			for _, ev := range p.Events {
				if ev.ExecutionID != c.id || ev.SessionID != "" {
					t.Errorf("an event of another owner: %+v", ev)
				}
			}
			if !c.next {
				return
			}
			cur, _ := strconv.ParseInt(p.NextCursor, 10, 64)
			rest, err := a.ExecutionEgress(ctx, c.id, airlock.EgressFilter{Limit: 3, Before: cur})
			if err != nil {
				t.Fatal(err)
			}
			if got := names(rest); !slices.Equal(got, []string{"api.test/allowed"}) || rest.NextCursor != "" {
				t.Errorf("second page %v (next %q)", got, rest.NextCursor)
			}
		})
	}

	// Another tenant's run is not found, like a missing one.
	for _, id := range []string{runB, "missing"} {
		var ce *client.Error
		if _, err := a.ExecutionEgress(ctx, id, airlock.EgressFilter{}); !errors.As(err, &ce) || ce.Status != 404 {
			t.Errorf("%s: %v, want 404", id, err)
		}
	}
	wantProblem(t, e.do(req{method: "GET", path: "/v1/executions/" + runB + "/egress", key: e.keyA}), 404, "not-found")
	wantProblem(t, e.do(req{method: "GET", path: "/v1/executions/" + runA + "/egress"}), 401, "unauthorized")
	for _, q := range []struct{ query, slug string }{
		{"limit=0", "invalid-limit"},
		{"limit=501", "invalid-limit"},
		{"limit=", "invalid-limit"},
		{"before=x", "invalid-cursor"},
		{"before=-1", "invalid-cursor"},
		{"kind=smtp", "invalid-filter"},
		{"verdict=maybe", "invalid-filter"},
	} {
		wantProblem(t, e.do(req{method: "GET", path: "/v1/executions/" + runA + "/egress?" + q.query, key: e.keyA}), http.StatusBadRequest, q.slug)
	}
	if _, err := a.ExecutionEgress(ctx, "", airlock.EgressFilter{}); airlock.ErrorCode(err) != airlock.EINVALID {
		t.Errorf("no ID: %v", err)
	}
}
