package microvm_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/testenv"
	"github.com/airlockhq/airlock/internal/teststack"
	"github.com/airlockhq/airlock/service/provision"
)

// The clone-uniqueness check of the gVisor backend's base snapshots
// (provision's TestRestoredClonesDiffer), on microVMs: a tenant whose
// floor is vm runs the data-science Python, whose recipe restores; once
// its base snapshot is built, requests are served by restores of it
// (restore on demand), and nothing random is shared between the clones.
func TestRestoredClonesDiffer(t *testing.T) {
	vm := testenv.MicroVM(t)
	st := teststack.New(t, teststack.Options{
		Extra: []airlock.Backend{vm}, SnapshotDir: filepath.Join(t.TempDir(), "snapshots"),
		Pool: provision.PoolConfig{Disabled: true}, NoServer: true, MaxTimeout: 5 * time.Minute,
		Admission: provision.Admission{OneShotTenantShare: 1},
	})
	tenant := st.NewTenant(t, "clones").Tenant
	if err := st.Store.SetTenantIsolation(context.Background(), tenant.ID, airlock.IsolationVM); err != nil {
		t.Fatal(err)
	}
	tenant.Isolation = airlock.IsolationVM
	req := airlock.ExecuteRequest{Language: airlock.Python, Image: "python-ds", Code: teststack.CloneCode, TimeoutSec: 240}
	run := func() (*airlock.Execution, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
		defer cancel()
		e, err := st.Manager.Execute(ctx, tenant, "test", req)
		if err != nil {
			return nil, err
		}
		if e.Status != airlock.StatusCompleted || e.ExitCode != 0 || e.Backend != "microvm" {
			return nil, fmt.Errorf("%s exit %d on %s: %s", e.Status, e.ExitCode, e.Backend, e.Stderr)
		}
		return e, nil
	}
	// The first miss boots cold and has the base snapshot built; under
	// TCG the build (a boot, the imports, the migration) takes minutes.
	var first *airlock.Execution
	for deadline := time.Now().Add(15 * time.Minute); ; {
		var err error
		if first, err = run(); err != nil {
			t.Fatal(err)
		}
		if first.StartSource == airlock.StartRestore {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no execution restored from the base snapshot in 15 minutes (last: %s)", first.StartSource)
		}
	}
	t.Logf("restored: acquire %.0f ms, run %.0f ms", first.Phases[airlock.PhaseAcquire], first.Phases[airlock.PhaseRun])
	outs := []string{first.Stdout}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := 0; i < 3; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e, err := run()
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				t.Error(err)
				return
			}
			if e.StartSource != airlock.StartRestore {
				t.Errorf("clone started %s, want restore", e.StartSource)
			}
			outs = append(outs, e.Stdout)
		}()
	}
	wg.Wait()
	teststack.CheckClonesDiffer(t, outs)
}
