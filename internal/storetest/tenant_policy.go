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
	if err := db.FinishExecution(ctx, e); err != nil {
		t.Fatal(err)
	}
	got, err := db.Execution(ctx, tn.ID, e.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Backend != "namespaces" {
		t.Errorf("backend %q, want namespaces", got.Backend)
	}
	list, err := db.ListExecutions(ctx, airlock.ExecutionFilter{TenantID: tn.ID, Limit: 10})
	if err != nil || len(list) != 1 || list[0].Backend != "namespaces" {
		t.Errorf("listed: %+v %v", list, err)
	}
}
