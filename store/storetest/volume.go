package storetest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
)

func problemType(err error) string {
	if ae, ok := err.(*airlock.Error); ok {
		return ae.Type
	}
	return ""
}

func testVolumes(t *testing.T, bk Backend) {
	ctx := context.Background()
	db := bk.fresh(t)
	acme := mustTenant(t, db, "acme")
	globex := mustTenant(t, db, "globex")
	at := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	mk := func(tenant, name string, mib, max int64) error {
		return db.CreateVolume(ctx, &airlock.Volume{TenantID: tenant, Name: name, SizeMiB: mib, CreatedAt: at}, max)
	}
	if err := mk(acme.ID, "data", 100, 300); err != nil {
		t.Fatal(err)
	}
	if err := mk(acme.ID, "cache", 200, 300); err != nil {
		t.Fatal(err)
	}
	// Over the quota: 300 MiB held, 1 more does not fit.
	err := mk(acme.ID, "more", 1, 300)
	wantCode(t, "CreateVolume(over quota)", err, airlock.ERATELIMITED)
	if problemType(err) != "volume-quota" {
		t.Errorf("over quota: %v, want volume-quota", err)
	}
	err = mk(acme.ID, "data", 10, -1)
	wantCode(t, "CreateVolume(dup)", err, airlock.ECONFLICT)
	wantCode(t, "CreateVolume(no tenant)", mk("nope", "x", 10, -1), airlock.ENOTFOUND)
	wantCode(t, "CreateVolume(bad name)", mk(acme.ID, "../x", 10, -1), airlock.EINVALID)
	// Another tenant may use the same name, and its quota is its own.
	if err := mk(globex.ID, "data", 50, 100); err != nil {
		t.Fatal(err)
	}
	if n, err := db.VolumeMiB(ctx, acme.ID); err != nil || n != 300 {
		t.Errorf("VolumeMiB(acme) = %d, %v, want 300", n, err)
	}
	vs, err := db.ListVolumes(ctx, acme.ID)
	if err != nil || len(vs) != 2 || vs[0].Name != "cache" || vs[1].Name != "data" || vs[1].SizeMiB != 100 || !vs[1].CreatedAt.Equal(at) {
		t.Fatalf("ListVolumes(acme) = %+v, %v", vs, err)
	}
	if vs, _ := db.ListVolumes(ctx, globex.ID); len(vs) != 1 || vs[0].SizeMiB != 50 {
		t.Errorf("ListVolumes(globex) = %+v", vs)
	}
	v, err := db.Volume(ctx, globex.ID, "data")
	if err != nil || v.SizeMiB != 50 || v.TenantID != globex.ID || v.Mounts == nil {
		t.Errorf("Volume(globex, data) = %+v, %v", v, err)
	}
	_, err = db.Volume(ctx, globex.ID, "cache")
	wantCode(t, "Volume(other tenant's)", err, airlock.ENOTFOUND)
	wantCode(t, "DeleteVolume(other tenant's)", db.DeleteVolume(ctx, globex.ID, "cache"), airlock.ENOTFOUND)
	if err := db.DeleteVolume(ctx, acme.ID, "cache"); err != nil {
		t.Fatal(err)
	}
	wantCode(t, "DeleteVolume(again)", db.DeleteVolume(ctx, acme.ID, "cache"), airlock.ENOTFOUND)
	if err := mk(acme.ID, "more", 200, 300); err != nil {
		t.Errorf("after a delete the quota has room: %v", err)
	}
	// Deleting the tenant removes its volumes and claims.
	if err := db.ClaimVolumes(ctx, []airlock.VolumeClaim{{TenantID: globex.ID, Volume: "data", SessionID: "s1", Path: "/data", MountedAt: at}}); err != nil {
		t.Fatal(err)
	}
	if err := db.DeleteTenant(ctx, globex.ID); err != nil {
		t.Fatalf("DeleteTenant with a mounted volume: %v", err)
	}
	if cs, _ := db.AllVolumeClaims(ctx, ""); len(cs) != 0 {
		t.Errorf("claims after the tenant's deletion: %+v", cs)
	}
}

func testVolumeClaims(t *testing.T, bk Backend) {
	ctx := context.Background()
	db := bk.fresh(t)
	acme := mustTenant(t, db, "acme")
	other := mustTenant(t, db, "other")
	at := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	for _, n := range []string{"a", "b"} {
		if err := db.CreateVolume(ctx, &airlock.Volume{TenantID: acme.ID, Name: n, SizeMiB: 16, CreatedAt: at}, -1); err != nil {
			t.Fatal(err)
		}
	}
	claim := func(session, vol string, ro bool) airlock.VolumeClaim {
		return airlock.VolumeClaim{TenantID: acme.ID, Volume: vol, SessionID: session, Path: "/mnt/" + vol, ReadOnly: ro, Node: "n1", MountedAt: at}
	}
	if err := db.ClaimVolumes(ctx, []airlock.VolumeClaim{claim("s1", "a", false), claim("s1", "b", true)}); err != nil {
		t.Fatal(err)
	}
	// A second writer of a is refused, and none of its claims is taken.
	err := db.ClaimVolumes(ctx, []airlock.VolumeClaim{claim("s2", "b", false), claim("s2", "a", false)})
	wantCode(t, "second writer", err, airlock.ECONFLICT)
	if problemType(err) != "volume-busy" {
		t.Errorf("second writer: %v, want volume-busy", err)
	}
	if cs, _ := db.AllVolumeClaims(ctx, ""); len(cs) != 2 {
		t.Fatalf("claims after a refused claim = %+v, want s1's two", cs)
	}
	// Readers beside the writer are fine, and so is a writer of b
	// (which s1 reads).
	if err := db.ClaimVolumes(ctx, []airlock.VolumeClaim{claim("s3", "a", true), claim("s3", "b", false)}); err != nil {
		t.Fatal(err)
	}
	// Another tenant's claim of acme's volume finds no volume.
	err = db.ClaimVolumes(ctx, []airlock.VolumeClaim{{TenantID: other.ID, Volume: "a", SessionID: "s4", Path: "/a", MountedAt: at}})
	wantCode(t, "other tenant's volume", err, airlock.ENOTFOUND)
	v, err := db.Volume(ctx, acme.ID, "a")
	if err != nil || len(v.Mounts) != 2 || v.Mounts[0].SessionID != "s1" || v.Mounts[0].ReadOnly || !v.Mounts[1].ReadOnly || v.Mounts[0].Path != "/mnt/a" {
		t.Fatalf("Volume(a).Mounts = %+v, %v", v, err)
	}
	err = db.DeleteVolume(ctx, acme.ID, "a")
	wantCode(t, "delete a mounted volume", err, airlock.ECONFLICT)
	if problemType(err) != "volume-in-use" {
		t.Errorf("delete a mounted volume: %v, want volume-in-use", err)
	}
	if cs, err := db.AllVolumeClaims(ctx, "n1"); err != nil || len(cs) != 4 {
		t.Errorf("AllVolumeClaims(n1) = %+v, %v", cs, err)
	}
	if cs, _ := db.AllVolumeClaims(ctx, "n2"); len(cs) != 0 {
		t.Errorf("AllVolumeClaims(n2) = %+v", cs)
	}
	for _, s := range []string{"s1", "s3"} {
		if err := db.ReleaseVolumes(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.DeleteVolume(ctx, acme.ID, "a"); err != nil {
		t.Errorf("delete after release: %v", err)
	}
	// Writers racing for one volume: exactly one wins.
	var wg sync.WaitGroup
	wins := make(chan string, 8)
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			s := string(rune('p' + i))
			if err := db.ClaimVolumes(ctx, []airlock.VolumeClaim{claim(s, "b", false)}); err == nil {
				wins <- s
			} else if airlock.ErrorCode(err) != airlock.ECONFLICT {
				t.Errorf("racing claim: %v", err)
			}
		}(i)
	}
	wg.Wait()
	close(wins)
	if n := len(wins); n != 1 {
		t.Errorf("%d racing writers won, want 1", n)
	}
}
