package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
)

// testReopen: a database opened again (a restart, another process or
// node) has what was written, and opening applies no migration twice.
func testReopen(t *testing.T, bk Backend) {
	ctx := context.Background()
	loc := bk.New(t)
	c := newClock()
	db := bk.Open(t, loc, c.Now)
	tn := mustTenant(t, db, "acme")
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		db := bk.Open(t, loc, c.Now)
		got, err := db.TenantByName(ctx, "acme")
		if err != nil || got.ID != tn.ID {
			t.Fatalf("reopen %d: TenantByName = %+v, %v; want ID %s", i, got, err, tn.ID)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

func testClosedStoreReturnsErrors(t *testing.T, bk Backend) {
	ctx := context.Background()
	db := bk.fresh(t)
	tn := mustTenant(t, db, "acme")
	e := mustExecution(t, db, tn.ID)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	ops := []struct {
		name string
		do   func() error
	}{
		{"CreateTenant", func() error { return db.CreateTenant(ctx, &airlock.Tenant{Name: "x"}) }},
		{"TenantByName", func() error { _, err := db.TenantByName(ctx, "acme"); return err }},
		{"TenantByID", func() error { _, err := db.TenantByID(ctx, tn.ID); return err }},
		{"ListTenants", func() error { _, err := db.ListTenants(ctx); return err }},
		{"CountTenants", func() error { _, err := db.CountTenants(ctx); return err }},
		{"CreateAPIKey", func() error {
			_, k := airlock.NewAPIKey(tn.ID, "", time.Now())
			return db.CreateAPIKey(ctx, k)
		}},
		{"TenantByKeyHash", func() error { _, err := db.TenantByKeyHash(ctx, "h"); return err }},
		{"CreateExecution", func() error {
			return db.CreateExecution(ctx, &airlock.Execution{TenantID: tn.ID, Language: airlock.Bash})
		}},
		{"FinishExecution", func() error {
			return db.FinishExecution(ctx, &airlock.Execution{ID: e.ID, TenantID: tn.ID, Status: airlock.StatusCompleted})
		}},
		{"Execution", func() error { _, err := db.Execution(ctx, tn.ID, e.ID); return err }},
		{"ListExecutions", func() error {
			_, err := db.ListExecutions(ctx, airlock.ExecutionFilter{TenantID: tn.ID})
			return err
		}},
		{"ListExecutions cursor", func() error {
			_, err := db.ListExecutions(ctx, airlock.ExecutionFilter{TenantID: tn.ID, Before: e.ID})
			return err
		}},
		{"FailRunningExecutions", func() error { _, err := db.FailRunningExecutions(ctx, "x"); return err }},
		{"Artifact", func() error { _, err := db.Artifact(ctx, tn.ID, "a"); return err }},
		{"CreateSession", func() error { return db.CreateSession(ctx, newSession(tn.ID)) }},
		{"LiveSessions", func() error { _, err := db.LiveSessions(ctx); return err }},
	}
	for _, op := range ops {
		t.Run(op.name, func(t *testing.T) {
			if err := op.do(); err == nil {
				t.Fatal("no error after Close")
			}
		})
	}
}

func testCanceledContext(t *testing.T, bk Backend) {
	db := bk.fresh(t)
	tn := mustTenant(t, db, "acme")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := db.CreateExecution(ctx, &airlock.Execution{TenantID: tn.ID, Language: airlock.Bash}); err == nil {
		t.Error("CreateExecution with a canceled context succeeded")
	}
	if _, err := db.ListExecutions(ctx, airlock.ExecutionFilter{TenantID: tn.ID}); err == nil {
		t.Error("ListExecutions with a canceled context succeeded")
	}
	if _, err := db.TenantByID(ctx, tn.ID); err == nil {
		t.Error("TenantByID with a canceled context succeeded")
	}
	// Nothing was written by the canceled calls.
	if page, err := db.ListExecutions(context.Background(), airlock.ExecutionFilter{TenantID: tn.ID}); err != nil || len(page) != 0 {
		t.Errorf("after canceled calls: %d executions, %v", len(page), err)
	}
}
