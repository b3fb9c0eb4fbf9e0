package provision_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/testenv/testreq"
	"github.com/airlockhq/airlock/internal/teststack"
	"github.com/airlockhq/airlock/service/oneshot"
	"github.com/airlockhq/airlock/service/provision"
	"github.com/airlockhq/airlock/store/sqlite"
)

type harness struct {
	m      *oneshot.Manager
	prov   *provision.Provisioner
	store  *sqlite.DB
	tenant *airlock.Tenant
	snaps  string
}

// newHarness builds a node on real runsc, SQLite and blobs, with base
// snapshots in snapDir (a fresh one when empty), the given pool and the
// one-shot pairs readied at start.
func newHarness(t *testing.T, snapDir string, pool provision.PoolConfig, warm ...string) *harness {
	t.Helper()
	if snapDir == "" {
		snapDir = filepath.Join(t.TempDir(), "snapshots")
	}
	// One tenant runs everything here: it may use all of the node.
	st := teststack.New(t, teststack.Options{SnapshotDir: snapDir, Pool: pool, Warm: warm, NoServer: true,
		Admission: provision.Admission{OneShotTenantShare: 1}})
	tenant := st.NewTenant(t, "t"+airlock.NewID()[:8])
	return &harness{m: st.Manager, prov: st.Provisioner, store: st.Store, tenant: tenant.Tenant, snaps: snapDir}
}

func (h *harness) run(t *testing.T, req airlock.ExecuteRequest) *airlock.Execution {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	e, err := h.m.Execute(ctx, h.tenant, "test", req)
	if err != nil {
		t.Fatalf("execute: %v", err)
	}
	return e
}

// waitFor runs req until its sandbox comes from want, or fails.
func (h *harness) waitFor(t *testing.T, req airlock.ExecuteRequest, want string) *airlock.Execution {
	t.Helper()
	var e *airlock.Execution
	testreq.Eventually(t, 3*time.Minute, "an execution started from "+want, func() bool {
		e = h.run(t, req)
		return e.StartSource == want
	})
	return e
}

// TestRestoredClonesDiffer restores many sandboxes from one base snapshot
// and checks that everything random in them differs.
func TestRestoredClonesDiffer(t *testing.T) {
	h := newHarness(t, "", provision.PoolConfig{Disabled: true}, "python-ds/python")
	cases := []struct {
		name string
		code string
	}{
		// The data-science Python (the code imports numpy), the one
		// flavour restored from a snapshot.
		{"data-science", teststack.CloneCode},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			req := airlock.ExecuteRequest{Language: airlock.Python, Code: c.code}
			first := h.waitFor(t, req, airlock.StartRestore)
			outs := []string{first.Stdout}
			var mu sync.Mutex
			var wg sync.WaitGroup
			for i := 0; i < 5; i++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					e := h.run(t, req)
					mu.Lock()
					defer mu.Unlock()
					if e.StartSource != airlock.StartRestore {
						t.Errorf("clone started %s, want restore", e.StartSource)
					}
					outs = append(outs, e.Stdout)
				}()
			}
			wg.Wait()
			teststack.CheckClonesDiffer(t, outs)
		})
	}
}

// TestPoolHandsOutEachMemberOnce checks that pool members serve requests
// and that a member serves exactly one.
func TestPoolHandsOutEachMemberOnce(t *testing.T) {
	h := newHarness(t, "", provision.PoolConfig{Min: 2, Max: 2}, "base/bash")
	req := airlock.ExecuteRequest{Language: airlock.Bash, Code: `echo $$ $(cat /proc/sys/kernel/random/uuid) > /workspace/mark; ls /workspace`}
	testreq.Eventually(t, 2*time.Minute, "the pool to fill to 2", func() bool {
		n, _ := h.prov.PoolStats()
		return n == 2
	})
	for i := 0; i < 4; i++ {
		e := h.run(t, req)
		// A reused sandbox would still hold the mark of the run before.
		if strings.TrimSpace(e.Stdout) != "mark" {
			t.Fatalf("run %d saw a used workspace: %q", i, e.Stdout)
		}
		if i < 2 && e.StartSource != airlock.StartPool {
			t.Errorf("run %d started %s with a full pool", i, e.StartSource)
		}
		if e.Phases[airlock.PhaseAcquire] <= 0 || e.Phases[airlock.PhaseRun] <= 0 {
			t.Errorf("phases not recorded: %v", e.Phases)
		}
	}
	_, mem := h.prov.PoolStats()
	t.Logf("pool memory after the runs: %d MiB", mem>>20)
}

// TestCorruptSnapshotFallsBack corrupts a base snapshot on disk: requests
// still succeed (cold) and the snapshot is rebuilt.
func TestCorruptSnapshotFallsBack(t *testing.T) {
	snapDir := filepath.Join(t.TempDir(), "snapshots")
	req := airlock.ExecuteRequest{Language: airlock.Python, Code: "import numpy\nprint('ok')"}
	func() {
		h := newHarness(t, snapDir, provision.PoolConfig{Disabled: true}, "python-ds/python")
		h.waitFor(t, req, airlock.StartRestore)
	}()
	entries, err := os.ReadDir(snapDir)
	if err != nil || len(entries) != 1 {
		t.Fatalf("snapshot dir: %v %v", entries, err)
	}
	pages := filepath.Join(snapDir, entries[0].Name(), "pages.img")
	if err := os.WriteFile(pages, []byte("corrupt"), 0o600); err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, snapDir, provision.PoolConfig{Disabled: true}, "python-ds/python")
	e := h.run(t, req)
	if e.Status != airlock.StatusCompleted || e.Stdout != "ok\n" {
		t.Fatalf("request with a corrupt snapshot: %+v", e)
	}
	if e.StartSource == airlock.StartRestore {
		t.Fatalf("restored from a corrupt snapshot")
	}
	h.waitFor(t, req, airlock.StartRestore) // rebuilt
}

// TestDestroyPhaseRecorded checks the destroy time reaches the record.
func TestDestroyPhaseRecorded(t *testing.T) {
	h := newHarness(t, "", provision.PoolConfig{Disabled: true})
	e := h.run(t, airlock.ExecuteRequest{Language: airlock.Bash, Code: "true"})
	var got *airlock.Execution
	testreq.Eventually(t, 30*time.Second, "the destroy phase in the record", func() bool {
		var err error
		got, err = h.store.Execution(context.Background(), h.tenant.ID, e.ID)
		if err != nil {
			t.Fatal(err)
		}
		return got.Phases[airlock.PhaseDestroy] > 0
	})
	for _, p := range []string{airlock.PhaseAcquire, airlock.PhaseHandIn, airlock.PhaseRun, airlock.PhaseCollect} {
		if _, ok := got.Phases[p]; !ok {
			t.Errorf("phase %s missing from the record: %v", p, got.Phases)
		}
	}
	if got.StartSource != airlock.StartCold {
		t.Errorf("start %q, want cold", got.StartSource)
	}
}
