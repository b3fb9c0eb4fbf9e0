package storetest

import (
	"context"
	"reflect"
	"testing"

	"github.com/airlockhq/airlock"
)

func testE2BSandboxes(t *testing.T, bk Backend) {
	ctx := context.Background()
	db := bk.fresh(t)
	a := mustTenant(t, db, "a")
	b := mustTenant(t, db, "b")
	s := newSession(a.ID)
	if err := db.CreateSession(ctx, s); err != nil {
		t.Fatal(err)
	}

	if _, err := db.E2BSandbox(ctx, s.ID); airlock.ErrorCode(err) != airlock.ENOTFOUND {
		t.Fatalf("before any put: %v, want not found", err)
	}
	rec := &airlock.E2BSandbox{SandboxID: s.ID, TenantID: a.ID, TemplateID: "code-interpreter-v1",
		Metadata: map[string]string{"user": "x y", "k": ""}, EnvVars: map[string]string{"A": "1"}}
	if err := db.PutE2BSandbox(ctx, rec); err != nil {
		t.Fatal(err)
	}
	got, err := db.E2BSandbox(ctx, s.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.TenantID != a.ID || got.TemplateID != rec.TemplateID || !reflect.DeepEqual(got.Metadata, rec.Metadata) ||
		!reflect.DeepEqual(got.EnvVars, rec.EnvVars) || len(got.Contexts) != 0 || got.CreatedAt.IsZero() {
		t.Fatalf("got %+v, want %+v", got, rec)
	}
	// Replace: the contexts are remembered, the creation time kept.
	got.Contexts = map[string]string{"python": "ctx-1"}
	if err := db.PutE2BSandbox(ctx, got); err != nil {
		t.Fatal(err)
	}
	again, err := db.E2BSandbox(ctx, s.ID)
	if err != nil || again.Contexts["python"] != "ctx-1" || !again.CreatedAt.Equal(got.CreatedAt) {
		t.Fatalf("after replace: %+v, %v", again, err)
	}
	// Another tenant can neither claim nor overwrite it; an unknown
	// session has no record.
	if err := db.PutE2BSandbox(ctx, &airlock.E2BSandbox{SandboxID: s.ID, TenantID: b.ID, TemplateID: "base"}); airlock.ErrorCode(err) != airlock.ENOTFOUND {
		t.Fatalf("put by another tenant: %v, want not found", err)
	}
	if err := db.PutE2BSandbox(ctx, &airlock.E2BSandbox{SandboxID: "nope", TenantID: a.ID, TemplateID: "base"}); airlock.ErrorCode(err) != airlock.ENOTFOUND {
		t.Fatalf("put for no session: %v, want not found", err)
	}
	if got, _ := db.E2BSandbox(ctx, s.ID); got.TenantID != a.ID || got.TemplateID != "code-interpreter-v1" {
		t.Fatalf("record changed by another tenant: %+v", got)
	}
}
