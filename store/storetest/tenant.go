package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
)

func testTenants(t *testing.T, bk Backend) {
	ctx := context.Background()
	db := bk.fresh(t)

	acme := &airlock.Tenant{Name: "acme", FirstParty: true}
	if err := db.CreateTenant(ctx, acme); err != nil {
		t.Fatal(err)
	}
	if acme.ID == "" || acme.CreatedAt.IsZero() {
		t.Fatalf("CreateTenant did not fill ID and CreatedAt: %+v", acme)
	}
	given := &airlock.Tenant{ID: "t-given", Name: "globex", CreatedAt: time.Date(2025, 5, 6, 7, 8, 9, 10, time.FixedZone("x", 3600))}
	if err := db.CreateTenant(ctx, given); err != nil {
		t.Fatal(err)
	}

	errs := []struct {
		name string
		t    *airlock.Tenant
		code string
	}{
		{"duplicate name", &airlock.Tenant{Name: "acme"}, airlock.ECONFLICT},
		{"duplicate id", &airlock.Tenant{ID: "t-given", Name: "other"}, airlock.ECONFLICT},
		{"empty name", &airlock.Tenant{Name: " "}, airlock.EINVALID},
	}
	for _, tt := range errs {
		t.Run(tt.name, func(t *testing.T) {
			wantCode(t, "CreateTenant", db.CreateTenant(ctx, tt.t), tt.code)
		})
	}
	if err := db.CreateTenant(ctx, &airlock.Tenant{Name: "acme"}); airlock.ErrorMessage(err) != `tenant "acme" exists` {
		t.Errorf("duplicate name message = %q", airlock.ErrorMessage(err))
	}

	lookups := []struct {
		name string
		get  func() (*airlock.Tenant, error)
		want *airlock.Tenant
	}{
		{"by name", func() (*airlock.Tenant, error) { return db.TenantByName(ctx, "acme") }, acme},
		{"by id", func() (*airlock.Tenant, error) { return db.TenantByID(ctx, acme.ID) }, acme},
		{"given fields", func() (*airlock.Tenant, error) { return db.TenantByID(ctx, "t-given") }, given},
		{"missing name", func() (*airlock.Tenant, error) { return db.TenantByName(ctx, "nobody") }, nil},
		{"missing id", func() (*airlock.Tenant, error) { return db.TenantByID(ctx, "nobody") }, nil},
	}
	for _, tt := range lookups {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.get()
			if tt.want == nil {
				wantCode(t, "lookup", err, airlock.ENOTFOUND)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if *got != *tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
			if got.CreatedAt.Location() != time.UTC {
				t.Errorf("CreatedAt not UTC: %v", got.CreatedAt)
			}
		})
	}

	list, err := db.ListTenants(ctx)
	if err != nil || len(list) != 2 || list[0].Name != "globex" || list[1].Name != "acme" {
		t.Errorf("ListTenants = %v, %v; want globex (older), acme", list, err)
	}
	if n, err := db.CountTenants(ctx); n != 2 || err != nil {
		t.Errorf("CountTenants = %d, %v; want 2", n, err)
	}
}

func testAPIKeys(t *testing.T, bk Backend) {
	ctx := context.Background()
	db := bk.fresh(t)
	acme := mustTenant(t, db, "acme")
	globex := mustTenant(t, db, "globex")

	secretA, keyA := airlock.NewAPIKey(acme.ID, "", time.Now())
	secretG, keyG := airlock.NewAPIKey(globex.ID, "key-g", time.Now())
	for _, k := range []*airlock.APIKey{keyA, keyG} {
		if err := db.CreateAPIKey(ctx, k); err != nil {
			t.Fatal(err)
		}
	}
	if keyA.ID == "" {
		t.Error("CreateAPIKey did not fill ID")
	}

	lookups := []struct {
		name   string
		secret string
		want   string // tenant ID; "" means not found
	}{
		{"acme key", secretA, acme.ID},
		{"globex key", secretG, globex.ID},
		{"unknown key", airlock.APIKeyPrefix + "nope", ""},
		{"empty", "", ""},
	}
	for _, tt := range lookups {
		t.Run(tt.name, func(t *testing.T) {
			got, err := db.TenantByKeyHash(ctx, airlock.HashAPIKey(tt.secret))
			if tt.want == "" {
				wantCode(t, "TenantByKeyHash", err, airlock.ENOTFOUND)
				return
			}
			if err != nil || got.ID != tt.want {
				t.Fatalf("TenantByKeyHash = %+v, %v; want tenant %s", got, err, tt.want)
			}
		})
	}

	_, orphan := airlock.NewAPIKey("no-such-tenant", "", time.Now())
	errs := []struct {
		name string
		k    *airlock.APIKey
		code string
	}{
		{"duplicate hash", &airlock.APIKey{TenantID: globex.ID, Hash: keyA.Hash, Prefix: "alk_x"}, airlock.ECONFLICT},
		{"unknown tenant", orphan, airlock.ENOTFOUND},
		{"no tenant", &airlock.APIKey{Hash: "h"}, airlock.EINVALID},
		{"no hash", &airlock.APIKey{TenantID: acme.ID}, airlock.EINVALID},
	}
	for _, tt := range errs {
		t.Run(tt.name, func(t *testing.T) {
			wantCode(t, "CreateAPIKey", db.CreateAPIKey(ctx, tt.k), tt.code)
		})
	}
}
