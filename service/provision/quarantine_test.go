package provision_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/service/provision"
	"github.com/airlockhq/airlock/store/sqlite"
)

// A quarantined tenant's claims are refused (403 tenant-quarantined),
// one-shot and session alike, until the quarantine is lifted; another
// tenant's are not.
func TestQuarantineRefusesClaims(t *testing.T) {
	ctx := context.Background()
	store, err := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(t.TempDir(), "db")})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	bad, good := &airlock.Tenant{Name: "bad"}, &airlock.Tenant{Name: "good"}
	for _, tn := range []*airlock.Tenant{bad, good} {
		if err := store.CreateTenant(ctx, tn); err != nil {
			t.Fatal(err)
		}
	}
	p, err := provision.New(provision.Config{
		Backends:    []airlock.Backend{fakeBackend{name: "kernel", caps: airlock.Capabilities{SeparateKernel: true}}},
		Pool:        provision.PoolConfig{Disabled: true},
		Quarantines: store,
	})
	if err != nil {
		t.Fatal(err)
	}
	admit := func(tn *airlock.Tenant, kind provision.Kind) error {
		tk, err := p.Admit(ctx, provision.Claim{Kind: kind, Tenant: tn})
		if err == nil {
			tk.Cancel()
		}
		return err
	}
	if err := store.QuarantineTenant(ctx, &airlock.Quarantine{TenantID: bad.ID, Reason: "mining detected"}); err != nil {
		t.Fatal(err)
	}
	for _, kind := range []provision.Kind{provision.OneShot, provision.Session} {
		wantProblem(t, "quarantined "+kind.String(), admit(bad, kind), airlock.EFORBIDDEN, airlock.ProblemTenantQuarantined, false)
		if err := admit(good, kind); err != nil {
			t.Errorf("another tenant's %s: %v", kind, err)
		}
	}
	if ok, err := store.UnquarantineTenant(ctx, bad.ID); err != nil || !ok {
		t.Fatal(ok, err)
	}
	if err := admit(bad, provision.OneShot); err != nil {
		t.Errorf("after the quarantine was lifted: %v", err)
	}
}
