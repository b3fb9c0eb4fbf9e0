package microvm_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/testenv"
	"github.com/airlockhq/airlock/internal/testenv/testreq"
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
	snapDir := filepath.Join(t.TempDir(), "snapshots")
	st := teststack.New(t, teststack.Options{
		Extra: []airlock.Backend{vm}, SnapshotDir: snapDir,
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
	// The test waits for the snapshot's manifest instead of running more
	// cold executions meanwhile: each would boot a VM and import numpy
	// under TCG beside the build, slowing it.
	if _, err := run(); err != nil {
		t.Fatal(err)
	}
	testreq.Eventually(t, 15*time.Minute, "a base snapshot in "+snapDir, func() bool {
		// A snapshot is built in a .tmp- directory and renamed when whole.
		des, _ := os.ReadDir(snapDir)
		for _, de := range des {
			if !strings.HasPrefix(de.Name(), ".") {
				if _, err := os.Stat(filepath.Join(snapDir, de.Name(), "airlock-snapshot.json")); err == nil {
					return true
				}
			}
		}
		return false
	})
	// The manifest is written just before the snapshot is marked ready:
	// a run in between still boots cold.
	var first *airlock.Execution
	testreq.Eventually(t, 2*time.Minute, "an execution restored from the base snapshot", func() bool {
		var err error
		if first, err = run(); err != nil {
			t.Fatal(err)
		}
		return first.StartSource == airlock.StartRestore
	})
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
