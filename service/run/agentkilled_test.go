package run_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/service/run"
)

// The agent's connection ends under a running program and the sandbox
// ends with it (the code killed the agent, its first process): the run
// is the code's result, recorded failed with ended_by agent_killed and
// returned without an error. If the sandbox lives on, the agent merely
// stopped answering: that stays the service's failure (sandbox-failed).
func TestAgentKilledByCode(t *testing.T) {
	code := "echo started; sleep 30"
	t.Run("sandbox ends", func(t *testing.T) {
		f := newFixture(t)
		j := f.job(code, time.Minute, 1<<20)
		j.Observer = cancelOnOutput(func() {
			f.agentConn.Close()
			go func() { time.Sleep(50 * time.Millisecond); close(f.sb.done) }() // the backend notices a moment later
		})
		e := f.begin(t, code)
		got, err := f.r.Run(context.Background(), e, j)
		if err != nil {
			t.Fatalf("run: %v", err)
		}
		if got.Status != airlock.StatusFailed || got.EndedBy != airlock.EndedAgentKilled || got.ExitCode != 137 {
			t.Fatalf("status %s, ended_by %q, exit %d", got.Status, got.EndedBy, got.ExitCode)
		}
		if rec := f.recorded(t, e); rec.Status != airlock.StatusFailed || rec.EndedBy != airlock.EndedAgentKilled || rec.Error == "" {
			t.Errorf("record: %+v", rec)
		}
	})
	t.Run("sandbox lives", func(t *testing.T) {
		f := newFixture(t)
		j := f.job(code, time.Minute, 1<<20)
		j.Observer = cancelOnOutput(func() { f.agentConn.Close() })
		e := f.begin(t, code)
		_, err := f.r.Run(context.Background(), e, j)
		var ae *airlock.Error
		if !errors.As(err, &ae) || ae.Type != run.ProblemSandboxFailed {
			t.Fatalf("got %v, want sandbox-failed", err)
		}
		if rec := f.recorded(t, e); rec.Status != airlock.StatusFailed || rec.EndedBy != "" {
			t.Errorf("record: %+v", rec)
		}
	})
}
