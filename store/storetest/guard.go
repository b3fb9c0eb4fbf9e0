package storetest

import (
	"context"
	"reflect"
	"testing"

	"github.com/airlockhq/airlock"
)

func testSetTenantGuard(t *testing.T, bk Backend) {
	ctx := context.Background()
	db := bk.fresh(t)
	tn := mustTenant(t, db, "acme")
	if tn.Guard != "" || tn.Guard.Effective() != airlock.GuardWarn {
		t.Fatalf("a new tenant's guard %q", tn.Guard)
	}
	for _, p := range []airlock.GuardPolicy{airlock.GuardBlock, airlock.GuardOff, airlock.GuardWarn} {
		if err := db.SetTenantGuard(ctx, tn.ID, p); err != nil {
			t.Fatal(err)
		}
		for _, get := range []func() (*airlock.Tenant, error){
			func() (*airlock.Tenant, error) { return db.TenantByName(ctx, "acme") },
			func() (*airlock.Tenant, error) { return db.TenantByID(ctx, tn.ID) },
		} {
			if got, err := get(); err != nil || got.Guard != p {
				t.Errorf("after SetTenantGuard(%s): %+v %v", p, got, err)
			}
		}
	}
	wantCode(t, "SetTenantGuard(strict)", db.SetTenantGuard(ctx, tn.ID, "strict"), airlock.EINVALID)
	wantCode(t, "SetTenantGuard(missing)", db.SetTenantGuard(ctx, "nope", airlock.GuardOff), airlock.ENOTFOUND)
}

// Findings are stored with an execution, and a refused execution reads
// back as blocked.
func testExecutionFindings(t *testing.T, bk Backend) {
	ctx := context.Background()
	db := bk.fresh(t)
	tn := mustTenant(t, db, "acme")
	findings := []airlock.GuardFinding{{Rule: "miner", Severity: airlock.SeverityCritical, Line: 2, Column: 5, Excerpt: "xmrig -o x", Message: "runs the miner xmrig"}}
	for _, tt := range []struct {
		status   airlock.ExecutionStatus
		findings []airlock.GuardFinding
	}{
		{airlock.StatusCompleted, nil},
		{airlock.StatusCompleted, findings},
		{airlock.StatusBlocked, findings},
		{airlock.StatusFailed, findings},
	} {
		e := &airlock.Execution{TenantID: tn.ID, Language: airlock.Bash, Findings: tt.findings}
		if err := db.CreateExecution(ctx, e); err != nil {
			t.Fatal(err)
		}
		e.Status = tt.status
		if err := db.FinishExecution(ctx, e); err != nil {
			t.Fatal(err)
		}
		got, err := db.Execution(ctx, tn.ID, e.ID)
		if err != nil {
			t.Fatal(err)
		}
		want := tt.findings
		if want == nil {
			want = []airlock.GuardFinding{}
		}
		if got.Status != tt.status || !reflect.DeepEqual(got.Findings, want) {
			t.Errorf("stored %s with %v: read back %s with %v", tt.status, tt.findings, got.Status, got.Findings)
		}
		page, err := db.ListExecutions(ctx, airlock.ExecutionFilter{TenantID: tn.ID, Limit: 1})
		if err != nil || len(page) != 1 || page[0].Status != tt.status || !reflect.DeepEqual(page[0].Findings, want) {
			t.Errorf("listed: %+v %v", page, err)
		}
	}
}
