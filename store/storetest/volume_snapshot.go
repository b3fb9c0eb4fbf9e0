package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
)

// Volume snapshots: scoped to their tenant, listed by volume newest
// first, outliving their volume, and counted with the workspace
// snapshots in SnapshotBytes.
func testVolumeSnapshots(t *testing.T, bk Backend) {
	ctx := context.Background()
	db := bk.fresh(t)
	a := mustTenant(t, db, "acme")
	b := mustTenant(t, db, "globex")
	at := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	mk := func(tenant, id, volume string, bytes int64, off time.Duration) error {
		return db.CreateVolumeSnapshot(ctx, &airlock.VolumeSnapshot{ID: id, TenantID: tenant, Volume: volume, Name: "n-" + id,
			SizeMiB: 32, Bytes: bytes, SHA256: "h", Entries: 3, KeyID: "dk", BlobKey: "volume-snapshots/" + tenant + "/" + id,
			Node: "n1", CreatedAt: at.Add(off)})
	}
	for i, s := range []struct {
		id, volume string
		bytes      int64
	}{{"v1", "data", 100}, {"v2", "data", 200}, {"v3", "cache", 50}} {
		if err := mk(a.ID, s.id, s.volume, s.bytes, time.Duration(i)*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	wantCode(t, "CreateVolumeSnapshot(dup)", mk(a.ID, "v1", "data", 1, 0), airlock.ECONFLICT)
	wantCode(t, "CreateVolumeSnapshot(no tenant)", mk("nope", "v9", "data", 1, 0), airlock.ENOTFOUND)
	if err := db.CreateSnapshot(ctx, &airlock.Snapshot{ID: "w1", TenantID: a.ID, SessionID: "s", Kind: airlock.SnapshotWorkspace,
		Image: "base", Size: airlock.SizeSmall, Bytes: 1000, SHA256: "h", KeyID: "dk", BlobKey: "snapshots/x", CreatedAt: at}); err != nil {
		t.Fatal(err)
	}
	if n, err := db.SnapshotBytes(ctx, a.ID); err != nil || n != 1350 {
		t.Errorf("SnapshotBytes(acme) = %d, %v, want 1350 (workspace and volume snapshots)", n, err)
	}
	l, err := db.ListVolumeSnapshots(ctx, a.ID, "data")
	if err != nil || len(l) != 2 || l[0].ID != "v2" || l[1].ID != "v1" {
		t.Fatalf("ListVolumeSnapshots(acme, data) = %+v, %v", l, err)
	}
	got := l[1]
	if got.TenantID != a.ID || got.Volume != "data" || got.Name != "n-v1" || got.SizeMiB != 32 || got.Bytes != 100 ||
		got.Entries != 3 || got.KeyID != "dk" || got.Node != "n1" || !got.CreatedAt.Equal(at) {
		t.Errorf("read back %+v", got)
	}
	if l, err := db.ListVolumeSnapshots(ctx, b.ID, "data"); err != nil || len(l) != 0 {
		t.Errorf("another tenant lists %+v, %v", l, err)
	}
	_, err = db.VolumeSnapshot(ctx, b.ID, "v1")
	wantCode(t, "VolumeSnapshot(other tenant)", err, airlock.ENOTFOUND)
	if problemType(err) != "volume-snapshot-not-found" {
		t.Errorf("other tenant's: %v", err)
	}
	wantCode(t, "DeleteVolumeSnapshot(other tenant)", db.DeleteVolumeSnapshot(ctx, b.ID, "v1"), airlock.ENOTFOUND)
	if s, err := db.VolumeSnapshot(ctx, a.ID, "v3"); err != nil || s.Volume != "cache" {
		t.Errorf("VolumeSnapshot(acme, v3) = %+v, %v", s, err)
	}
	if err := db.DeleteVolumeSnapshot(ctx, a.ID, "v1"); err != nil {
		t.Fatal(err)
	}
	wantCode(t, "DeleteVolumeSnapshot(again)", db.DeleteVolumeSnapshot(ctx, a.ID, "v1"), airlock.ENOTFOUND)
	if n, err := db.SnapshotBytes(ctx, a.ID); err != nil || n != 1250 {
		t.Errorf("SnapshotBytes after a delete = %d, %v, want 1250", n, err)
	}
}
