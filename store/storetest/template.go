package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
)

// testTemplates: names unique per owner, the operator's visible to all
// and shadowed by a tenant's of the same name, the build's outcome
// written, sizes summed, deletion.
func testTemplates(t *testing.T, bk Backend) {
	db := bk.fresh(t)
	ctx := context.Background()
	a, b := mustTenant(t, db, "a"), mustTenant(t, db, "b")
	mk := func(tenant, name string) *airlock.Template {
		t.Helper()
		tp := &airlock.Template{TenantID: tenant, Name: name, Status: airlock.TemplateBuilding, Source: airlock.TemplateFromImage,
			FromImage: "127.0.0.1:5000/x:1", StartCmd: "sleep 1"}
		if err := db.CreateTemplate(ctx, tp); err != nil {
			t.Fatalf("CreateTemplate(%q, %q): %v", tenant, name, err)
		}
		if tp.ID == "" || tp.CreatedAt.IsZero() {
			t.Fatalf("CreateTemplate left ID %q, CreatedAt %v", tp.ID, tp.CreatedAt)
		}
		return tp
	}
	op := mk("", "shared")
	mk("", "py")
	ta := mk(a.ID, "py")
	mk(b.ID, "mine")
	wantCode(t, "CreateTemplate(same owner, same name)", db.CreateTemplate(ctx, &airlock.Template{TenantID: a.ID, Name: "py",
		Status: airlock.TemplateBuilding, Source: airlock.TemplateFromImage}), airlock.ECONFLICT)
	wantCode(t, "CreateTemplate(no name)", db.CreateTemplate(ctx, &airlock.Template{Status: airlock.TemplateBuilding}), airlock.EINVALID)

	names := func(tenant string) []string {
		t.Helper()
		l, err := db.ListTemplates(ctx, tenant)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, x := range l {
			out = append(out, x.Name+"@"+x.TenantID)
		}
		return out
	}
	if got, want := names(a.ID), []string{"py@" + a.ID, "shared@"}; !equal(got, want) {
		t.Errorf("ListTemplates(a) = %v, want %v", got, want)
	}
	if got, want := names(b.ID), []string{"mine@" + b.ID, "py@", "shared@"}; !equal(got, want) {
		t.Errorf("ListTemplates(b) = %v, want %v", got, want)
	}
	if got, want := names(""), []string{"py@", "shared@"}; !equal(got, want) {
		t.Errorf("ListTemplates(operator) = %v, want %v", got, want)
	}

	got, err := db.TemplateByName(ctx, a.ID, "py")
	if err != nil || got.ID != ta.ID || got.StartCmd != "sleep 1" || got.FromImage != "127.0.0.1:5000/x:1" {
		t.Fatalf("TemplateByName(a, py) = %+v, %v", got, err)
	}
	_, err = db.TemplateByName(ctx, b.ID, "shared")
	wantCode(t, "TemplateByName(b, operator's name)", err, airlock.ENOTFOUND)

	now := time.Date(2026, 2, 3, 4, 5, 6, 0, time.UTC)
	op.Status, op.Digest, op.ImageHash, op.SizeBytes = airlock.TemplateReady, "sha256:abc", "def", 1234
	op.Env, op.Workdir, op.User, op.ReadyAt = []string{"A=1", "B=2"}, "/app", "1000", &now
	op.BlobDigest = "sha256:0123"
	if err := db.UpdateTemplate(ctx, op); err != nil {
		t.Fatal(err)
	}
	got, err = db.TemplateByID(ctx, op.ID)
	if err != nil || got.Status != airlock.TemplateReady || got.SizeBytes != 1234 || len(got.Env) != 2 || got.Workdir != "/app" ||
		got.User != "1000" || got.ReadyAt == nil || !got.ReadyAt.Equal(now) || got.Digest != "sha256:abc" ||
		got.BlobDigest != "sha256:0123" {
		t.Fatalf("TemplateByID after update = %+v, %v", got, err)
	}
	ta.Status, ta.Reason, ta.FailedLine, ta.SizeBytes = airlock.TemplateFailed, "step 3 failed", 3, 10
	if err := db.UpdateTemplate(ctx, ta); err != nil {
		t.Fatal(err)
	}
	if n, err := db.TemplateBytes(ctx, ""); err != nil || n != 1234 {
		t.Errorf("TemplateBytes(operator) = %d, %v", n, err)
	}
	if n, err := db.TemplateBytes(ctx, a.ID); err != nil || n != 10 {
		t.Errorf("TemplateBytes(a) = %d, %v", n, err)
	}
	if n, err := db.TemplateBytes(ctx, "nobody"); err != nil || n != 0 {
		t.Errorf("TemplateBytes(nobody) = %d, %v", n, err)
	}
	if n, err := db.LiveSessionsOnImage(ctx, op.ImageName()); err != nil || n != 0 {
		t.Errorf("LiveSessionsOnImage = %d, %v", n, err)
	}
	if err := db.DeleteTemplate(ctx, ta.ID); err != nil {
		t.Fatal(err)
	}
	wantCode(t, "DeleteTemplate(again)", db.DeleteTemplate(ctx, ta.ID), airlock.ENOTFOUND)
	wantCode(t, "UpdateTemplate(deleted)", db.UpdateTemplate(ctx, ta), airlock.ENOTFOUND)
	_, err = db.TemplateByID(ctx, ta.ID)
	wantCode(t, "TemplateByID(deleted)", err, airlock.ENOTFOUND)
	if got, want := names(a.ID), []string{"py@", "shared@"}; !equal(got, want) {
		t.Errorf("ListTemplates(a) after delete = %v, want %v", got, want)
	}
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
