package run_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/service/guard"
	"github.com/airlockhq/airlock/service/run"
)

// Every run is screened: by Screen, or by Begin when its caller did not;
// the policy decides what a finding does, and a record whose code changed
// after Screen is screened again.
func TestScreen(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	const bad, good = "echo hi; xmrig -o pool:3333", "echo hi"
	rec := func(code string, p airlock.GuardPolicy) run.Record {
		return run.Record{TenantID: f.tenant.ID, Language: airlock.Bash, Image: "base", Code: code, Backend: "host", Guard: p}
	}
	miner := func(fs []airlock.GuardFinding) bool {
		return slices.ContainsFunc(fs, func(x airlock.GuardFinding) bool { return x.Rule == "miner" })
	}
	for _, tt := range []struct {
		name     string
		policy   airlock.GuardPolicy
		code     string
		findings bool
	}{
		{"default warns", "", bad, true},
		{"warn", airlock.GuardWarn, bad, true},
		{"off", airlock.GuardOff, bad, false},
		{"block, clean", airlock.GuardBlock, good, false},
	} {
		e, err := f.r.Begin(ctx, rec(tt.code, tt.policy))
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if got := f.recorded(t, e); miner(got.Findings) != tt.findings || miner(e.Findings) != tt.findings || got.Status != airlock.StatusRunning {
			t.Errorf("%s: findings %v (recorded %v), want a miner: %v", tt.name, e.Findings, got.Findings, tt.findings)
		}
	}

	// block refuses, records the refusal, and Begin refuses as well.
	for _, call := range []func(run.Record) error{
		func(r run.Record) error { _, err := f.r.Screen(ctx, r); return err },
		func(r run.Record) error { _, err := f.r.Begin(ctx, r); return err },
	} {
		err := call(rec(bad, airlock.GuardBlock))
		var ae *airlock.Error
		if !errors.As(err, &ae) || ae.Code != airlock.EUNPROCESSABLE || ae.Type != airlock.ProblemGuardBlocked || ae.Refusal == nil || !miner(ae.Refusal.Findings) {
			t.Fatalf("block: %v", err)
		}
		got := f.recorded(t, &airlock.Execution{ID: ae.Refusal.ExecutionID})
		if got.Status != airlock.StatusBlocked || !miner(got.Findings) || got.FinishedAt == nil {
			t.Errorf("the refusal's record: %+v", got)
		}
	}

	// Screened clean, then changed: Begin checks the code it records.
	screened, err := f.r.Screen(ctx, rec(good, airlock.GuardBlock))
	if err != nil {
		t.Fatal(err)
	}
	screened.Code = bad
	if _, err := f.r.Begin(ctx, screened); airlock.ErrorCode(err) != airlock.EUNPROCESSABLE {
		t.Errorf("code changed after Screen: Begin %v, want the refusal", err)
	}
}

// countingGuard is the real guard, counting its parses.
type countingGuard struct {
	*guard.Guard
	inspects, imports atomic.Int32
}

func (g *countingGuard) Inspect(ctx context.Context, lang airlock.Language, code string) guard.Report {
	g.inspects.Add(1)
	return g.Guard.Inspect(ctx, lang, code)
}

func (g *countingGuard) PythonImports(ctx context.Context, code string) guard.Imports {
	g.imports.Add(1)
	return g.Guard.PythonImports(ctx, code)
}

// A run's Python is parsed once: the imports of a screened record are
// the guard's, and only a record the guard did not check (policy off) is
// parsed for its imports alone.
func TestImportsParsedOnce(t *testing.T) {
	if !guard.PythonParser {
		t.Skip("this build has no Python parser (cgo is off)")
	}
	f := newFixture(t)
	ctx := context.Background()
	real, err := guard.New(guard.Config{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		policy            airlock.GuardPolicy
		inspects, imports int32
	}{
		{airlock.GuardWarn, 1, 0},
		{airlock.GuardBlock, 1, 0},
		{airlock.GuardOff, 0, 1},
	} {
		g := &countingGuard{Guard: real}
		r, err := run.New(run.Config{Store: f.store, Guard: g, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			t.Fatal(err)
		}
		rec, err := r.Screen(ctx, run.Record{TenantID: f.tenant.ID, Language: airlock.Python, Image: "base",
			Code: "import numpy as np\nprint(np.zeros(2))", Backend: "host", Guard: tt.policy})
		if err != nil {
			t.Fatal(err)
		}
		imp := r.Imports(ctx, rec)
		if !imp.Parsed || !slices.Equal(imp.Modules, []string{"numpy"}) {
			t.Errorf("%s: imports %+v, want numpy", tt.policy, imp)
		}
		if g.inspects.Load() != tt.inspects || g.imports.Load() != tt.imports {
			t.Errorf("%s: %d checks and %d parses for imports, want %d and %d",
				tt.policy, g.inspects.Load(), g.imports.Load(), tt.inspects, tt.imports)
		}
	}
}
