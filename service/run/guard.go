package run

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/service/guard"
)

// Checker is the static check of code before it runs (package guard).
type Checker interface {
	// Inspect checks code and returns the findings and, for Python,
	// the imports the same parse found.
	Inspect(ctx context.Context, lang airlock.Language, code string) guard.Report
	// CheckArgv checks a command given as an argv (airlock.Command).
	CheckArgv(ctx context.Context, argv []string) []airlock.GuardFinding
	// PythonImports parses Python code for its imports alone.
	PythonImports(ctx context.Context, code string) guard.Imports
}

// screening is what the guard said of a record's code under a policy:
// set by Screen, or by Begin; a record whose code, language or policy
// changed since is screened again.
type screening struct {
	code     string
	lang     airlock.Language
	policy   airlock.GuardPolicy
	findings []airlock.GuardFinding
	// inspected: the guard parsed the code, and imports are what it
	// found (Python).
	inspected bool
	imports   guard.Imports
}

func (s *screening) of(rec Record) bool {
	return s != nil && s.code == rec.Code && s.lang == rec.Language && s.policy == rec.Guard.Effective()
}

// Screen runs the guard on the record's code under the tenant's policy
// (rec.Guard) and returns the record with its findings, for Begin. Begin
// screens a record that was not screened, so no run escapes the guard;
// a front-end calls Screen first to refuse code before it takes anything
// (admission, a sandbox). Under the block policy, code with a finding
// that blocks is recorded as an execution with status blocked and
// refused with a 422 problem guard-blocked that lists the findings.
func (r *Runner) Screen(ctx context.Context, rec Record) (Record, error) {
	if rec.screened.of(rec) {
		return rec, nil
	}
	policy := rec.Guard.Effective()
	sc := &screening{code: rec.Code, lang: rec.Language, policy: policy, findings: []airlock.GuardFinding{}}
	rec.screened = sc
	if policy == airlock.GuardOff {
		return rec, nil
	}
	start := time.Now()
	if rec.Language == airlock.Command {
		sc.findings = r.cfg.Guard.CheckArgv(ctx, rec.Argv)
	} else {
		rep := r.cfg.Guard.Inspect(ctx, rec.Language, rec.Code)
		sc.findings, sc.imports, sc.inspected = rep.Findings, rep.Imports, true
	}
	r.metrics.guardSeconds.WithLabelValues(string(rec.Language)).Observe(time.Since(start).Seconds())
	var blocking []airlock.GuardFinding
	if policy == airlock.GuardBlock {
		for _, f := range sc.findings {
			if f.Blocks() {
				blocking = append(blocking, f)
			}
		}
	}
	action := "reported"
	if len(blocking) > 0 {
		action = "blocked"
	}
	for _, f := range sc.findings {
		r.metrics.guardFindings.WithLabelValues(f.Rule, action).Inc()
	}
	if len(blocking) == 0 {
		return rec, nil
	}
	e := r.newExecution(ctx, rec)
	if err := r.cfg.Store.CreateExecution(ctx, e); err != nil {
		return rec, fmt.Errorf("run: record the blocked execution: %w", err)
	}
	e.Status = airlock.StatusBlocked
	e.Error = "refused by the guard"
	if err := r.finish(ctx, e); err != nil {
		return rec, err
	}
	rules := make([]string, 0, len(blocking))
	for _, f := range blocking {
		rules = append(rules, fmt.Sprintf("%s at %d:%d", f.Rule, f.Line, f.Column))
	}
	return rec, &airlock.Error{
		Code: airlock.EUNPROCESSABLE, Type: airlock.ProblemGuardBlocked,
		Message: fmt.Sprintf("the guard refused the code under the tenant's block policy: %s (execution %s; nothing ran)",
			strings.Join(rules, ", "), e.ID),
		Refusal: &airlock.GuardRefusal{Findings: blocking, ExecutionID: e.ID},
	}
}

// Imports returns the imports of a record's Python code: those the
// guard's parse found when Screen checked it, else from a parse for them
// alone (the tenant's policy is off), so the code is parsed once.
func (r *Runner) Imports(ctx context.Context, rec Record) guard.Imports {
	if rec.Language != airlock.Python {
		return guard.Imports{}
	}
	if rec.screened.of(rec) && rec.screened.inspected {
		return rec.screened.imports
	}
	return r.cfg.Guard.PythonImports(ctx, rec.Code)
}

var _ Checker = (*guard.Guard)(nil)
