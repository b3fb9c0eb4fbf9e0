package session_test

import (
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/internal/teststack"
	"github.com/airlockhq/airlock/service/provision"
)

// Sessions get their sandboxes the way one-shot runs do: from the warm
// pool, else made (booted: an agent alone boots faster than it restores);
// and their execs and
// cells are recorded with the backend, how the sandbox was obtained, and
// the phases.
func TestSessionsStartWarm(t *testing.T) {
	s := newStackWith(t, teststack.Options{
		Snapshots: true, Pool: provision.PoolConfig{Min: 1, Max: 2}, WarmSessions: []string{"base/small"},
	})
	waitFor(t, 3*time.Minute, "a ready pool member", func() bool {
		n, _ := s.Provisioner.PoolStats()
		return n >= 1
	})
	ctx := ctxFor(t, 3*time.Minute)
	start := time.Now()
	sess := s.create(s.a, airlock.CreateSessionRequest{Image: "base"})
	took := time.Since(start)
	if sess.StartSource != airlock.StartPool || sess.Backend != "gvisor" {
		t.Fatalf("session start %q on %q, want a pool member on gvisor", sess.StartSource, sess.Backend)
	}
	t.Logf("a session from the pool was ready in %v", took.Round(time.Millisecond))
	e := s.shell(s.a, sess.ID, "echo hi")
	py, err := s.a.c.CreateContext(ctx, sess.ID, airlock.ContextPython)
	if err != nil {
		t.Fatal(err)
	}
	cell, err := s.a.c.RunCell(ctx, sess.ID, py.ID, airlock.RunCellRequest{Code: "print('from a cell'); 1/0"})
	if err != nil || cell.ExecutionID == "" || cell.Error == nil {
		t.Fatalf("cell: %+v %v", cell, err)
	}
	for _, id := range []string{e.ID, cell.ExecutionID} {
		got, err := s.a.c.Execution(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if got.SessionID != sess.ID || got.Backend != "gvisor" || got.StartSource != airlock.StartPool ||
			got.Phases[airlock.PhaseRun] <= 0 || got.Status != airlock.StatusCompleted {
			t.Errorf("record of %s: %+v", id, got)
		}
	}
	got, _ := s.a.c.Execution(ctx, cell.ExecutionID)
	if got.Language != airlock.Python || got.ExitCode != 1 || got.Stdout != "from a cell\n" {
		t.Errorf("the cell's record: language %s, exit %d, stdout %q", got.Language, got.ExitCode, got.Stdout)
	}
	if got, _ := s.a.c.Execution(ctx, e.ID); got.Phases[airlock.PhaseHandIn] <= 0 || got.Language != airlock.Bash {
		t.Errorf("the exec's record: %+v", got)
	}
	// The pool refills, and the next session comes from it again. (A
	// session's sandbox holds only its agent, which boots faster than a
	// snapshot of it restores: on a miss it boots; see BENCHMARKS.md.)
	waitFor(t, 3*time.Minute, "the pool to refill", func() bool {
		n, _ := s.Provisioner.PoolStats()
		return n >= 1
	})
	if next := s.create(s.a, airlock.CreateSessionRequest{Image: "base"}); next.StartSource != airlock.StartPool {
		t.Errorf("the next session started %s with a ready pool member", next.StartSource)
	}
}

// A session's backend is chosen within its tenant's isolation floor, as a
// one-shot run's is.
func TestSessionIsolationFloor(t *testing.T) {
	s := newStack(t, nil)
	ctx := ctxFor(t, time.Minute)
	_, _, err := s.a.c.CreateSession(ctx, airlock.CreateSessionRequest{Image: "base", Isolation: airlock.IsolationContainer})
	wantProblem(t, "an untrusted tenant asks for container", err, 403, airlock.ProblemIsolationNotAllowed)
	_, _, err = s.a.c.CreateSession(ctx, airlock.CreateSessionRequest{Image: "base", Isolation: airlock.IsolationVM})
	wantProblem(t, "vm on a node without one", err, 503, airlock.ProblemIsolationUnavailable)
	_, _, err = s.a.c.CreateSession(ctx, airlock.CreateSessionRequest{Image: "base", Isolation: "hypervisor"})
	wantProblem(t, "an unknown level", err, 400, airlock.ProblemUnknownIsolation)
	page, err := s.a.c.ListSessions(ctx, client.ListSessionsOptions{})
	if err != nil || len(page.Sessions) != 0 {
		t.Errorf("refused sessions left records: %+v %v", page, err)
	}
	sess := s.create(s.a, airlock.CreateSessionRequest{Image: "base", Isolation: airlock.IsolationKernel})
	if sess.Backend != "gvisor" {
		t.Errorf("kernel isolation ran on %q", sess.Backend)
	}
}
