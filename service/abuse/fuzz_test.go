package abuse_test

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/service/abuse"
	"github.com/airlockhq/airlock/store/sqlite"
)

// The fields of an egress event are what a sandbox chose (names it
// looked up, Host headers, addresses): the detectors take any of them
// without a panic, and never record one in an event's evidence.
func FuzzEgressEvent(f *testing.F) {
	f.Add("pool.supportxmr.com", "a.b:99", "10.0.0.1:3333", "dns", "denied", "long-label")
	f.Add("", ":", "", "connection", "denied", "stratum")
	f.Add("....", "host:notaport", "[::1]:1", "connection", "allowed", "")
	ctx := context.Background()
	store, err := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(f.TempDir(), "db")})
	if err != nil {
		f.Fatal(err)
	}
	defer store.Close()
	tn := &airlock.Tenant{Name: "fuzz"}
	if err := store.CreateTenant(ctx, tn); err != nil {
		f.Fatal(err)
	}
	m, err := abuse.New(abuse.Config{Store: store, Response: abuse.ResponseRecord, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		f.Fatal(err)
	}
	defer m.Close()
	tap := m.EgressStore(store)
	n := 0
	f.Fuzz(func(t *testing.T, name, host, dialled, kind, verdict, flag string) {
		n++
		sb := newFake("fz-" + itoa(n))
		stop := m.Watch(airlock.Watched{Sandbox: sb, TenantID: tn.ID, ExecutionID: "ex-" + itoa(n), Limits: airlock.DefaultLimits})
		defer stop()
		ev := &airlock.EgressEvent{TenantID: tn.ID, ExecutionID: "ex-" + itoa(n), Kind: kind, Verdict: verdict,
			Name: name, SNI: name, Host: host, Dialled: dialled, Flags: []string{flag}}
		if kind == "" || verdict == "" {
			ev.Kind, ev.Verdict = airlock.EgressDNS, airlock.VerdictDenied
		}
		tap.RecordEgress(ctx, []*airlock.EgressEvent{ev})
		m.Settle()
		evs, err := store.ListAbuseEvents(ctx, airlock.AbuseEventFilter{TenantID: tn.ID, Limit: 1})
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) == 1 && evs[0].ExecutionID == "ex-"+itoa(n) && len(name) > 3 {
			for k, v := range evs[0].Evidence {
				if s, ok := v.(string); ok && s == name && k != "pool" {
					t.Errorf("the evidence %s holds the name the sandbox sent: %q", k, s)
				}
			}
		}
	})
}
