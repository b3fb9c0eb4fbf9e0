package node

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/store/sqlite"
)

// The pruner deletes events and deliveries once they are older than the
// retention (here seconds), and keeps newer ones.
func TestEventPruner(t *testing.T) {
	ctx := context.Background()
	db, err := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(t.TempDir(), "airlock.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	tenant := &airlock.Tenant{Name: "acme"}
	if err := db.CreateTenant(ctx, tenant); err != nil {
		t.Fatal(err)
	}
	hook := &airlock.Webhook{TenantID: tenant.ID, URL: "https://example.com/h", SealedSecret: []byte{1}, KeyID: "k"}
	if err := db.CreateWebhook(ctx, hook); err != nil {
		t.Fatal(err)
	}
	old := &airlock.Event{Type: airlock.EventSessionCreated, TenantID: tenant.ID, SessionID: "s1"}
	if err := db.RecordEvent(ctx, old); err != nil {
		t.Fatal(err)
	}
	const retention = 2 * time.Second
	p := startEventPruner(db, retention, nil, slog.New(slog.NewTextHandler(io.Discard, nil)))
	defer p.close()

	// Still there while younger than the retention.
	if evs, err := db.ListEvents(ctx, airlock.EventFilter{TenantID: tenant.ID}); err != nil || len(evs) != 1 {
		t.Fatalf("before the retention: %d %v", len(evs), err)
	}
	deadline := time.Now().Add(30 * time.Second)
	var fresh *airlock.Event
	for {
		evs, err := db.ListEvents(ctx, airlock.EventFilter{TenantID: tenant.ID})
		if err != nil {
			t.Fatal(err)
		}
		gone := true
		for _, ev := range evs {
			if ev.ID == old.ID {
				gone = false
			}
		}
		if gone {
			break
		}
		if time.Since(old.At) > retention/2 && fresh == nil {
			// An event recorded now is kept past the old one's prune.
			fresh = &airlock.Event{Type: airlock.EventSessionEnded, TenantID: tenant.ID, SessionID: "s1"}
			if err := db.RecordEvent(ctx, fresh); err != nil {
				t.Fatal(err)
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the event was not pruned %s after it happened (retention %s)", time.Since(old.At), retention)
		}
		time.Sleep(50 * time.Millisecond) // polling a condition
	}
	if age := time.Since(old.At); age < retention {
		t.Fatalf("pruned at age %s, before the retention %s", age, retention)
	}
	ds, err := db.ListDeliveries(ctx, tenant.ID, hook.ID, "", 10)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range ds {
		if d.EventID == old.ID {
			t.Errorf("the pruned event's delivery is kept: %+v", d)
		}
	}
	if fresh != nil && time.Since(fresh.At) < retention {
		if _, err := db.Event(ctx, fresh.ID); err != nil {
			t.Errorf("a fresh event was pruned: %v", err)
		}
	}
}
