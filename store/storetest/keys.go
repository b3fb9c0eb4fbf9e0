package storetest

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
)

// Named keys with an expiry, listed, touched and revoked; a revoked or
// expired key resolves to no tenant.
func testKeyLifecycle(t *testing.T, bk Backend) {
	ctx := context.Background()
	db := bk.fresh(t)
	acme := mustTenant(t, db, "acme")
	globex := mustTenant(t, db, "globex")

	secret, k := airlock.NewAPIKey(acme.ID, "", time.Now())
	k.Name = "ci"
	exp := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	k.ExpiresAt = &exp
	if err := db.CreateAPIKey(ctx, k); err != nil {
		t.Fatal(err)
	}
	if k.Role != airlock.RoleTenant {
		t.Errorf("role %q, want tenant", k.Role)
	}
	_, k2 := airlock.NewAPIKey(acme.ID, "", time.Now())
	if err := db.CreateAPIKey(ctx, k2); err != nil {
		t.Fatal(err)
	}
	_, kg := airlock.NewAPIKey(globex.ID, "", time.Now())
	if err := db.CreateAPIKey(ctx, kg); err != nil {
		t.Fatal(err)
	}

	got, err := db.APIKeyByHash(ctx, airlock.HashAPIKey(secret))
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != k.ID || got.Name != "ci" || got.TenantID != acme.ID || got.ExpiresAt == nil || !got.ExpiresAt.Equal(exp) ||
		got.RevokedAt != nil || got.LastUsedAt != nil || got.Hash != k.Hash || got.Prefix != k.Prefix {
		t.Errorf("APIKeyByHash = %+v", got)
	}
	if byID, err := db.APIKey(ctx, k.ID); err != nil || byID.ID != k.ID {
		t.Errorf("APIKey(%s) = %+v, %v", k.ID, byID, err)
	}
	_, err = db.APIKey(ctx, "nope")
	wantCode(t, "APIKey(nope)", err, airlock.ENOTFOUND)
	_, err = db.APIKeyByHash(ctx, "nope")
	wantCode(t, "APIKeyByHash(nope)", err, airlock.ENOTFOUND)

	list, err := db.ListAPIKeys(ctx, airlock.KeyFilter{TenantID: acme.ID})
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0].ID != k.ID || list[1].ID != k2.ID {
		t.Fatalf("ListAPIKeys(acme) = %v", ids(list))
	}
	_, err = db.ListAPIKeys(ctx, airlock.KeyFilter{})
	wantCode(t, "ListAPIKeys(no filter)", err, airlock.EINVALID)

	used := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)
	if err := db.TouchAPIKey(ctx, k.ID, used); err != nil {
		t.Fatal(err)
	}
	if err := db.TouchAPIKey(ctx, k.ID, used.Add(-time.Hour)); err != nil { // never back
		t.Fatal(err)
	}
	if got, _ := db.APIKey(ctx, k.ID); got.LastUsedAt == nil || !got.LastUsedAt.Equal(used) {
		t.Errorf("last used %v, want %v", got.LastUsedAt, used)
	}

	rk, err := db.RevokeAPIKey(ctx, k.ID)
	if err != nil {
		t.Fatal(err)
	}
	if rk.RevokedAt == nil {
		t.Fatal("RevokeAPIKey returned a key with no revoked_at")
	}
	again, err := db.RevokeAPIKey(ctx, k.ID)
	if err != nil || again.RevokedAt == nil || !again.RevokedAt.Equal(*rk.RevokedAt) {
		t.Errorf("second revoke = %+v, %v; want the first time %v", again, err, rk.RevokedAt)
	}
	_, err = db.RevokeAPIKey(ctx, "nope")
	wantCode(t, "RevokeAPIKey(nope)", err, airlock.ENOTFOUND)
	_, err = db.TenantByKeyHash(ctx, airlock.HashAPIKey(secret))
	wantCode(t, "TenantByKeyHash(revoked)", err, airlock.ENOTFOUND)
	if got, err := db.APIKeyByHash(ctx, airlock.HashAPIKey(secret)); err != nil || got.Usable(time.Now()) == nil {
		t.Errorf("revoked key = %+v, %v; want found and unusable", got, err)
	}
	// Another tenant's key is untouched.
	if got, _ := db.APIKey(ctx, kg.ID); got.RevokedAt != nil {
		t.Error("revoking acme's key revoked globex's")
	}

	// An expired key resolves to no tenant (the fake clock is in 2026).
	secretOld, old := airlock.NewAPIKey(acme.ID, "", time.Now())
	past := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
	old.ExpiresAt = &past
	if err := db.CreateAPIKey(ctx, old); err != nil {
		t.Fatal(err)
	}
	_, err = db.TenantByKeyHash(ctx, airlock.HashAPIKey(secretOld))
	wantCode(t, "TenantByKeyHash(expired)", err, airlock.ENOTFOUND)

	bad := &airlock.APIKey{TenantID: acme.ID, Hash: "h1", Name: "bad\x00name"}
	wantCode(t, "CreateAPIKey(bad name)", db.CreateAPIKey(ctx, bad), airlock.EINVALID)
	bad = &airlock.APIKey{TenantID: acme.ID, Hash: "h2", Role: "root"}
	wantCode(t, "CreateAPIKey(bad role)", db.CreateAPIKey(ctx, bad), airlock.EINVALID)
}

// Operator keys belong to no tenant and never resolve to one.
func testAdminKeys(t *testing.T, bk Backend) {
	ctx := context.Background()
	db := bk.fresh(t)
	acme := mustTenant(t, db, "acme")
	secret, k := airlock.NewAPIKey("", "", time.Now())
	k.Role, k.Name = airlock.RoleAdmin, "admin"
	if err := db.CreateAPIKey(ctx, k); err != nil {
		t.Fatal(err)
	}
	got, err := db.APIKeyByHash(ctx, airlock.HashAPIKey(secret))
	if err != nil || got.Role != airlock.RoleAdmin || got.TenantID != "" {
		t.Fatalf("admin key = %+v, %v", got, err)
	}
	_, err = db.TenantByKeyHash(ctx, airlock.HashAPIKey(secret))
	wantCode(t, "TenantByKeyHash(admin key)", err, airlock.ENOTFOUND)
	list, err := db.ListAPIKeys(ctx, airlock.KeyFilter{Role: airlock.RoleAdmin})
	if err != nil || len(list) != 1 || list[0].ID != k.ID {
		t.Fatalf("ListAPIKeys(admin) = %v, %v", ids(list), err)
	}
	if l, _ := db.ListAPIKeys(ctx, airlock.KeyFilter{TenantID: acme.ID}); len(l) != 0 {
		t.Errorf("acme lists %d keys, want 0", len(l))
	}
	withTenant := &airlock.APIKey{TenantID: acme.ID, Hash: "h3", Role: airlock.RoleAdmin}
	wantCode(t, "CreateAPIKey(admin with tenant)", db.CreateAPIKey(ctx, withTenant), airlock.EINVALID)
	noTenant := &airlock.APIKey{Hash: "h4", Role: airlock.RoleTenant}
	wantCode(t, "CreateAPIKey(tenant key without tenant)", db.CreateAPIKey(ctx, noTenant), airlock.EINVALID)
}

func testAuditLog(t *testing.T, bk Backend) {
	ctx := context.Background()
	db := bk.fresh(t)
	for i := range 5 {
		e := &airlock.AuditEntry{KeyID: "k1", KeyName: "admin", Role: airlock.RoleAdmin, Action: "tenant.create",
			Target: fmt.Sprintf("t%d", i), Status: 201, Result: "ok", Detail: "it's \"quoted\""}
		if i == 4 {
			e.Action, e.Status, e.Result = "key.revoke", 404, "not-found"
		}
		if err := db.RecordAudit(ctx, e); err != nil {
			t.Fatal(err)
		}
		if e.ID == "" || e.At.IsZero() {
			t.Fatalf("RecordAudit left ID %q at %v", e.ID, e.At)
		}
	}
	all, err := db.ListAudit(ctx, airlock.AuditFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 5 || all[0].Action != "key.revoke" || all[0].Status != 404 || all[4].Target != "t0" ||
		all[1].Detail != `it's "quoted"` || all[1].KeyName != "admin" || all[1].Role != airlock.RoleAdmin {
		t.Fatalf("ListAudit = %+v", all)
	}
	page, err := db.ListAudit(ctx, airlock.AuditFilter{Limit: 2})
	if err != nil || len(page) != 2 {
		t.Fatalf("page 1 = %d, %v", len(page), err)
	}
	next, err := db.ListAudit(ctx, airlock.AuditFilter{Limit: 2, Before: page[1].ID})
	if err != nil || len(next) != 2 || next[0].ID != all[2].ID {
		t.Fatalf("page 2 = %+v, %v", next, err)
	}
	only, err := db.ListAudit(ctx, airlock.AuditFilter{Action: "tenant.create"})
	if err != nil || len(only) != 4 {
		t.Fatalf("filtered = %d, %v", len(only), err)
	}
	wantCode(t, "RecordAudit(no action)", db.RecordAudit(ctx, &airlock.AuditEntry{KeyID: "k"}), airlock.EINVALID)
}

func testBrokerGrants(t *testing.T, bk Backend) {
	ctx := context.Background()
	db := bk.fresh(t)
	acme := mustTenant(t, db, "acme")
	globex := mustTenant(t, db, "globex")
	if g, err := db.BrokerGrants(ctx, acme.ID); err != nil || len(g) != 0 {
		t.Fatalf("new tenant's grants = %v, %v", g, err)
	}
	if err := db.SetBrokerGrants(ctx, acme.ID, []string{"tickets.write", "tickets.read", "tickets.read"}); err != nil {
		t.Fatal(err)
	}
	if err := db.SetBrokerGrants(ctx, globex.ID, []string{"mail.send"}); err != nil {
		t.Fatal(err)
	}
	if g, _ := db.BrokerGrants(ctx, acme.ID); !slices.Equal(g, []string{"tickets.read", "tickets.write"}) {
		t.Errorf("acme's grants = %v", g)
	}
	if err := db.SetBrokerGrants(ctx, acme.ID, []string{"tickets.read"}); err != nil {
		t.Fatal(err)
	}
	if g, _ := db.BrokerGrants(ctx, acme.ID); !slices.Equal(g, []string{"tickets.read"}) {
		t.Errorf("acme's grants after replace = %v", g)
	}
	if g, _ := db.BrokerGrants(ctx, globex.ID); !slices.Equal(g, []string{"mail.send"}) {
		t.Errorf("globex's grants = %v", g)
	}
	wantCode(t, "SetBrokerGrants(missing)", db.SetBrokerGrants(ctx, "nope", []string{"x"}), airlock.ENOTFOUND)
	wantCode(t, "SetBrokerGrants(empty scope)", db.SetBrokerGrants(ctx, acme.ID, []string{""}), airlock.EINVALID)
	if g, _ := db.BrokerGrants(ctx, acme.ID); !slices.Equal(g, []string{"tickets.read"}) {
		t.Errorf("a refused SetBrokerGrants changed the grants: %v", g)
	}
	if err := db.SetBrokerGrants(ctx, acme.ID, nil); err != nil {
		t.Fatal(err)
	}
	if g, _ := db.BrokerGrants(ctx, acme.ID); len(g) != 0 {
		t.Errorf("grants after clearing = %v", g)
	}
}

// Deleting a tenant removes its keys, executions and grants, and nobody
// else's.
func testDeleteTenant(t *testing.T, bk Backend) {
	ctx := context.Background()
	db := bk.fresh(t)
	acme := mustTenant(t, db, "acme")
	globex := mustTenant(t, db, "globex")
	secretA, ka := airlock.NewAPIKey(acme.ID, "", time.Now())
	secretG, kg := airlock.NewAPIKey(globex.ID, "", time.Now())
	for _, k := range []*airlock.APIKey{ka, kg} {
		if err := db.CreateAPIKey(ctx, k); err != nil {
			t.Fatal(err)
		}
	}
	ea := mustExecution(t, db, acme.ID)
	eg := mustExecution(t, db, globex.ID)
	if err := db.SetBrokerGrants(ctx, acme.ID, []string{"s"}); err != nil {
		t.Fatal(err)
	}
	if err := db.DeleteTenant(ctx, acme.ID); err != nil {
		t.Fatal(err)
	}
	wantCode(t, "DeleteTenant(again)", db.DeleteTenant(ctx, acme.ID), airlock.ENOTFOUND)
	_, err := db.TenantByID(ctx, acme.ID)
	wantCode(t, "TenantByID(deleted)", err, airlock.ENOTFOUND)
	_, err = db.APIKeyByHash(ctx, airlock.HashAPIKey(secretA))
	wantCode(t, "APIKeyByHash(deleted tenant's)", err, airlock.ENOTFOUND)
	_, err = db.Execution(ctx, acme.ID, ea.ID)
	wantCode(t, "Execution(deleted tenant's)", err, airlock.ENOTFOUND)
	if _, err := db.TenantByKeyHash(ctx, airlock.HashAPIKey(secretG)); err != nil {
		t.Errorf("globex's key: %v", err)
	}
	if _, err := db.Execution(ctx, globex.ID, eg.ID); err != nil {
		t.Errorf("globex's execution: %v", err)
	}
}

func ids(ks []*airlock.APIKey) []string {
	var out []string
	for _, k := range ks {
		out = append(out, k.ID)
	}
	return out
}
