package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/seal"
)

// A session can be recorded paused, and back ready, after migration 0012
// widened the state's CHECK constraint; a state outside the machine is
// still refused by the store.
func testSessionPausedState(t *testing.T, bk Backend) {
	ctx := context.Background()
	loc := bk.New(t)
	db := bk.Open(t, loc, newClock().Now)
	tn := mustTenant(t, db, "acme")
	s := &airlock.Session{TenantID: tn.ID, Image: "python-ds", Size: airlock.SizeSmall}
	if err := db.CreateSession(ctx, s); err != nil {
		t.Fatal(err)
	}
	for _, st := range []airlock.SessionState{airlock.SessionReady, airlock.SessionPaused, airlock.SessionReady, airlock.SessionPaused} {
		s.State = st
		if err := db.UpdateSession(ctx, s); err != nil {
			t.Fatalf("to %s: %v", st, err)
		}
	}
	db.Close()
	db2 := bk.Open(t, loc, newClock().Now) // the schema as read by a new process
	got, err := db2.Session(ctx, tn.ID, s.ID)
	if err != nil || got.State != airlock.SessionPaused {
		t.Fatalf("after reopen: %+v %v", got, err)
	}
	s.State = "sleeping"
	if err := db2.UpdateSession(ctx, s); err == nil {
		t.Fatal("an unknown state was stored")
	}
}

func testSnapshotsAndKeys(t *testing.T, bk Backend) {
	ctx := context.Background()
	db := bk.fresh(t)
	a, b := mustTenant(t, db, "acme"), mustTenant(t, db, "other")
	now := time.Now().UTC()
	for i, id := range []string{"s1", "s2", "s3"} {
		err := db.CreateSnapshot(ctx, &airlock.Snapshot{ID: id, TenantID: a.ID, SessionID: "x", Kind: airlock.SnapshotWorkspace,
			Image: "base", Size: airlock.SizeSmall, Bytes: int64(100 * (i + 1)), SHA256: "h", KeyID: "dk", BlobKey: "snapshots/" + id, CreatedAt: now.Add(time.Duration(i) * time.Second)})
		if err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.Snapshot(ctx, b.ID, "s1"); airlock.ErrorCode(err) != airlock.ENOTFOUND {
		t.Fatalf("another tenant's snapshot: %v", err)
	}
	page, err := db.ListSnapshots(ctx, a.ID, "", 2)
	if err != nil || len(page) != 2 || page[0].ID != "s3" {
		t.Fatalf("page: %v %v", page, err)
	}
	page, err = db.ListSnapshots(ctx, a.ID, "s2", 2)
	if err != nil || len(page) != 1 || page[0].ID != "s1" {
		t.Fatalf("second page: %v %v", page, err)
	}
	if n, err := db.SnapshotBytes(ctx, a.ID); err != nil || n != 600 {
		t.Fatalf("bytes %d %v", n, err)
	}
	wantCode(t, "delete another tenant's", db.DeleteSnapshot(ctx, b.ID, "s1"), airlock.ENOTFOUND)
	if err := db.DeleteSnapshot(ctx, a.ID, "s1"); err != nil {
		t.Fatal(err)
	}
	wantCode(t, "get deleted", func() error { _, err := db.Snapshot(ctx, a.ID, "s1"); return err }(), airlock.ENOTFOUND)

	// Keys: the first create wins; rewrap needs the old master key ID.
	k := &seal.TenantKey{TenantID: a.ID, ID: "dk-1", MasterKeyID: "mk-a", Wrapped: []byte{1, 2}, CreatedAt: now}
	if got, err := db.CreateTenantKey(ctx, k); err != nil || got.ID != "dk-1" {
		t.Fatalf("create key: %+v %v", got, err)
	}
	if got, err := db.CreateTenantKey(ctx, &seal.TenantKey{TenantID: a.ID, ID: "dk-2", MasterKeyID: "mk-a", Wrapped: []byte{3}, CreatedAt: now}); err != nil || got.ID != "dk-1" {
		t.Fatalf("second create: %+v %v", got, err)
	}
	wantCode(t, "rewrap under a stale id", db.RewrapTenantKey(ctx, a.ID, "dk-1", "mk-x", "mk-b", []byte{9}, now), airlock.ECONFLICT)
	if err := db.RewrapTenantKey(ctx, a.ID, "dk-1", "mk-a", "mk-b", []byte{9}, now); err != nil {
		t.Fatal(err)
	}
	if got, _ := db.TenantKey(ctx, a.ID); got.MasterKeyID != "mk-b" || got.Wrapped[0] != 9 || got.RotatedAt == nil {
		t.Fatalf("after rewrap: %+v", got)
	}
	if _, err := db.TenantKey(ctx, b.ID); airlock.ErrorCode(err) != airlock.ENOTFOUND {
		t.Fatalf("no key: %v", err)
	}

	// Pauses.
	p := &airlock.SessionPause{SessionID: "ss1", TenantID: a.ID, Dir: "/x", Backend: "gvisor", PausedAt: now}
	if err := db.PutPause(ctx, p); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Pause(ctx, b.ID, "ss1"); airlock.ErrorCode(err) != airlock.ENOTFOUND {
		t.Fatalf("another tenant's pause: %v", err)
	}
	if all, err := db.Pauses(ctx); err != nil || len(all) != 1 || all[0].Dir != "/x" {
		t.Fatalf("pauses %v %v", all, err)
	}
	db.DeletePause(ctx, "ss1")
	if all, _ := db.Pauses(ctx); len(all) != 0 {
		t.Fatal("pause not deleted")
	}
}
