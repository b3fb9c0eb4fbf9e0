package storetest

import (
	"context"
	"testing"

	"github.com/airlockhq/airlock"
)

func testSetTenantFirstParty(t *testing.T, bk Backend) {
	ctx := context.Background()
	db := bk.fresh(t)
	tn := mustTenant(t, db, "acme")
	if tn.FirstParty || tn.IsolationFloor() != airlock.IsolationKernel {
		t.Fatalf("a new tenant is first-party or has floor %s", tn.IsolationFloor())
	}
	for _, fp := range []bool{true, false, true} {
		if err := db.SetTenantFirstParty(ctx, tn.ID, fp); err != nil {
			t.Fatal(err)
		}
		got, err := db.TenantByName(ctx, "acme")
		if err != nil {
			t.Fatal(err)
		}
		if got.FirstParty != fp {
			t.Errorf("after SetTenantFirstParty(%v): first_party %v", fp, got.FirstParty)
		}
	}
	wantCode(t, "SetTenantFirstParty(missing)", db.SetTenantFirstParty(ctx, "nope", true), airlock.ENOTFOUND)
}

// The backend that ran an execution is part of its record.
func testExecutionBackend(t *testing.T, bk Backend) {
	ctx := context.Background()
	db := bk.fresh(t)
	tn := mustTenant(t, db, "acme")
	e := mustExecution(t, db, tn.ID)
	e.Status = airlock.StatusCompleted
	e.Backend = "namespaces"
	e.Accelerator = "tcg"
	if err := db.FinishExecution(ctx, e); err != nil {
		t.Fatal(err)
	}
	got, err := db.Execution(ctx, tn.ID, e.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Backend != "namespaces" || got.Accelerator != "tcg" {
		t.Errorf("backend %q accelerator %q, want namespaces, tcg", got.Backend, got.Accelerator)
	}
	list, err := db.ListExecutions(ctx, airlock.ExecutionFilter{TenantID: tn.ID, Limit: 10})
	if err != nil || len(list) != 1 || list[0].Backend != "namespaces" || list[0].Accelerator != "tcg" {
		t.Errorf("listed: %+v %v", list, err)
	}
}

// The operator's isolation floor of a tenant is stored, read back by
// name, ID and in the list, and cleared by "".
func testSetTenantIsolation(t *testing.T, bk Backend) {
	ctx := context.Background()
	db := bk.fresh(t)
	tn := mustTenant(t, db, "acme")
	if tn.Isolation != "" {
		t.Fatalf("a new tenant has isolation %q", tn.Isolation)
	}
	for _, tt := range []struct {
		set   airlock.Isolation
		floor airlock.Isolation
	}{
		{airlock.IsolationVM, airlock.IsolationVM},
		{airlock.IsolationContainer, airlock.IsolationKernel},
		{"", airlock.IsolationKernel},
		{airlock.IsolationVM, airlock.IsolationVM},
	} {
		if err := db.SetTenantIsolation(ctx, tn.ID, tt.set); err != nil {
			t.Fatal(err)
		}
		byName, err := db.TenantByName(ctx, "acme")
		if err != nil {
			t.Fatal(err)
		}
		byID, err := db.TenantByID(ctx, tn.ID)
		if err != nil {
			t.Fatal(err)
		}
		for _, got := range []*airlock.Tenant{byName, byID} {
			if got.Isolation != tt.set || got.IsolationFloor() != tt.floor {
				t.Errorf("after SetTenantIsolation(%q): isolation %q floor %s, want floor %s", tt.set, got.Isolation, got.IsolationFloor(), tt.floor)
			}
		}
	}
	wantCode(t, "SetTenantIsolation(bogus)", db.SetTenantIsolation(ctx, tn.ID, "chroot"), airlock.EINVALID)
	wantCode(t, "SetTenantIsolation(missing)", db.SetTenantIsolation(ctx, "nope", airlock.IsolationVM), airlock.ENOTFOUND)
	got, _ := db.TenantByName(ctx, "acme")
	if got.Isolation != airlock.IsolationVM {
		t.Errorf("a refused change changed the isolation to %q", got.Isolation)
	}
	ts, err := db.ListTenants(ctx)
	if err != nil || len(ts) != 1 || ts[0].Isolation != airlock.IsolationVM {
		t.Errorf("listed: %+v %v", ts, err)
	}
	vm := &airlock.Tenant{Name: "born-vm", Isolation: airlock.IsolationVM}
	if err := db.CreateTenant(ctx, vm); err != nil {
		t.Fatal(err)
	}
	if got, err := db.TenantByID(ctx, vm.ID); err != nil || got.Isolation != airlock.IsolationVM {
		t.Errorf("created with isolation vm: %+v %v", got, err)
	}
	wantCode(t, "CreateTenant(bogus isolation)", db.CreateTenant(ctx, &airlock.Tenant{Name: "x", Isolation: "chroot"}), airlock.EINVALID)
}
