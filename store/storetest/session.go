package storetest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
)

func newSession(tenantID string) *airlock.Session {
	now := time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)
	return &airlock.Session{
		TenantID:     tenantID,
		Image:        "python-ds",
		Size:         airlock.SizeSmall,
		Limits:       airlock.SessionLimits{CPUs: 1, MemoryBytes: 1 << 30, TimeoutS: 600},
		Network:      airlock.NetworkPolicy{Mode: airlock.NetworkNone},
		ExpiresAt:    now.Add(10 * time.Minute),
		LastActiveAt: now,
	}
}

func testSessionLifecycleRecord(t *testing.T, bk Backend) {
	ctx := context.Background()
	db := bk.fresh(t)
	a := mustTenant(t, db, "a")
	b := mustTenant(t, db, "b")

	s := newSession(a.ID)
	if err := db.CreateSession(ctx, s); err != nil {
		t.Fatal(err)
	}
	if s.ID == "" || s.State != airlock.SessionCreating || s.CreatedAt.IsZero() {
		t.Fatalf("created %+v", s)
	}
	got, err := db.Session(ctx, a.ID, s.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Limits != s.Limits || got.Network.Mode != "none" || !got.ExpiresAt.Equal(s.ExpiresAt) {
		t.Errorf("read back %+v, want %+v", got, s)
	}
	// Another tenant sees nothing, on every method.
	_, err = db.Session(ctx, b.ID, s.ID)
	wantCode(t, "Session as b", err, airlock.ENOTFOUND)
	other := *got
	other.TenantID = b.ID
	other.State = airlock.SessionReady
	wantCode(t, "UpdateSession as b", db.UpdateSession(ctx, &other), airlock.ENOTFOUND)
	if l, err := db.ListSessions(ctx, airlock.SessionFilter{TenantID: b.ID}); err != nil || len(l) != 0 {
		t.Errorf("b lists %v, %v", l, err)
	}

	got.State = airlock.SessionReady
	got.Usage.Execs = 3
	if err := db.UpdateSession(ctx, got); err != nil {
		t.Fatal(err)
	}
	live, err := db.LiveSessions(ctx)
	if err != nil || len(live) != 1 || live[0].ID != s.ID || live[0].Usage.Execs != 3 {
		t.Fatalf("live %v, %v", live, err)
	}
	ended := time.Date(2026, 1, 2, 4, 0, 0, 0, time.UTC)
	got.State, got.EndedAt, got.EndReason = airlock.SessionDestroyed, &ended, airlock.EndDeleted
	if err := db.UpdateSession(ctx, got); err != nil {
		t.Fatal(err)
	}
	// A final state is final.
	got.State = airlock.SessionReady
	wantCode(t, "resurrect", db.UpdateSession(ctx, got), airlock.ECONFLICT)
	final, err := db.Session(ctx, a.ID, s.ID)
	if err != nil || final.State != airlock.SessionDestroyed || final.EndReason != airlock.EndDeleted || final.EndedAt == nil || !final.EndedAt.Equal(ended) {
		t.Fatalf("final %+v, %v", final, err)
	}
	if live, _ := db.LiveSessions(ctx); len(live) != 0 {
		t.Errorf("ended session still live: %v", live)
	}

	wantCode(t, "unknown tenant", db.CreateSession(ctx, newSession("nope")), airlock.ENOTFOUND)
	dup := newSession(a.ID)
	dup.ID = s.ID
	wantCode(t, "duplicate id", db.CreateSession(ctx, dup), airlock.ECONFLICT)
	bad := newSession(a.ID)
	bad.State = airlock.SessionReady
	wantCode(t, "not creating", db.CreateSession(ctx, bad), airlock.EINVALID)
}

func testListSessionsPages(t *testing.T, bk Backend) {
	ctx := context.Background()
	db := bk.fresh(t)
	a := mustTenant(t, db, "a")
	var ids []string
	for i := 0; i < 5; i++ {
		s := newSession(a.ID)
		if err := db.CreateSession(ctx, s); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, s.ID)
	}
	// End the oldest one.
	s, _ := db.Session(ctx, a.ID, ids[0])
	s.State = airlock.SessionFailed
	if err := db.UpdateSession(ctx, s); err != nil {
		t.Fatal(err)
	}
	page1, err := db.ListSessions(ctx, airlock.SessionFilter{TenantID: a.ID, Limit: 3})
	if err != nil || len(page1) != 3 || page1[0].ID != ids[4] {
		t.Fatalf("page 1: %v %v", page1, err)
	}
	page2, err := db.ListSessions(ctx, airlock.SessionFilter{TenantID: a.ID, Limit: 3, Before: page1[2].ID})
	if err != nil || len(page2) != 2 || page2[1].ID != ids[0] {
		t.Fatalf("page 2: %v %v", page2, err)
	}
	live, err := db.ListSessions(ctx, airlock.SessionFilter{TenantID: a.ID, LiveOnly: true})
	if err != nil || len(live) != 4 {
		t.Fatalf("live: %d %v", len(live), err)
	}
	_, err = db.ListSessions(ctx, airlock.SessionFilter{TenantID: a.ID, Before: "nope"})
	wantCode(t, "bad cursor", err, airlock.EINVALID)
}

func testIdempotencyKeys(t *testing.T, bk Backend) {
	ctx := context.Background()
	db := bk.fresh(t)
	a := mustTenant(t, db, "a")
	b := mustTenant(t, db, "b")
	now := time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)
	key := func(tenant, k, hash, session string, at time.Time) *airlock.IdempotencyKey {
		return &airlock.IdempotencyKey{TenantID: tenant, Key: k, RequestHash: hash, SessionID: session, CreatedAt: at, ExpiresAt: at.Add(24 * time.Hour)}
	}
	held, ok, err := db.ClaimIdempotencyKey(ctx, key(a.ID, "k1", "h1", "s1", now))
	if err != nil || !ok || held.SessionID != "s1" {
		t.Fatalf("first claim: %+v %v %v", held, ok, err)
	}
	held, ok, err = db.ClaimIdempotencyKey(ctx, key(a.ID, "k1", "h2", "s2", now.Add(time.Hour)))
	if err != nil || ok || held.SessionID != "s1" || held.RequestHash != "h1" {
		t.Fatalf("second claim: %+v %v %v", held, ok, err)
	}
	// Keys are per tenant.
	if _, ok, err := db.ClaimIdempotencyKey(ctx, key(b.ID, "k1", "h1", "s3", now)); err != nil || !ok {
		t.Fatalf("b's claim: %v %v", ok, err)
	}
	// After 24 hours the key is free again.
	held, ok, err = db.ClaimIdempotencyKey(ctx, key(a.ID, "k1", "h2", "s4", now.Add(24*time.Hour)))
	if err != nil || !ok || held.SessionID != "s4" {
		t.Fatalf("claim after expiry: %+v %v %v", held, ok, err)
	}
	// Release only frees the key for the session that holds it.
	if err := db.ReleaseIdempotencyKey(ctx, a.ID, "k1", "s1"); err != nil {
		t.Fatal(err)
	}
	if held, ok, _ := db.ClaimIdempotencyKey(ctx, key(a.ID, "k1", "h9", "s9", now.Add(25*time.Hour))); ok || held.SessionID != "s4" {
		t.Fatalf("release by a stale session freed the key: %+v", held)
	}
	if err := db.ReleaseIdempotencyKey(ctx, a.ID, "k1", "s4"); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := db.ClaimIdempotencyKey(ctx, key(a.ID, "k1", "h9", "s9", now.Add(25*time.Hour))); !ok {
		t.Fatal("released key not free")
	}
	n, err := db.DeleteExpiredIdempotencyKeys(ctx, now.Add(72*time.Hour))
	if err != nil || n != 2 {
		t.Fatalf("expired: %d %v", n, err)
	}
	_, _, err = db.ClaimIdempotencyKey(ctx, key(a.ID, "bad key", "h", "s", now))
	wantCode(t, "bad key", err, airlock.EINVALID)
}

// Many concurrent claims of one key: exactly one wins and all see it.
func testIdempotencyKeyRace(t *testing.T, bk Backend) {
	ctx := context.Background()
	db := bk.fresh(t)
	a := mustTenant(t, db, "a")
	now := time.Now()
	const n = 32
	var wg sync.WaitGroup
	winners := make(chan string, n)
	seen := make(chan string, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			k := &airlock.IdempotencyKey{TenantID: a.ID, Key: "race", RequestHash: "h", SessionID: fmt.Sprint("s", i), CreatedAt: now, ExpiresAt: now.Add(time.Hour)}
			held, ok, err := db.ClaimIdempotencyKey(ctx, k)
			if err != nil {
				t.Error(err)
				return
			}
			if ok {
				winners <- held.SessionID
			}
			seen <- held.SessionID
		}(i)
	}
	wg.Wait()
	close(winners)
	close(seen)
	var w []string
	for s := range winners {
		w = append(w, s)
	}
	if len(w) != 1 {
		t.Fatalf("%d winners: %v", len(w), w)
	}
	for s := range seen {
		if s != w[0] {
			t.Errorf("a claim saw %s, the winner is %s", s, w[0])
		}
	}
}
