package session_test

import (
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/testenv/testreq"
)

// Code that kills the sandbox's agent (its first process; gVisor lets a
// program of the sandbox SIGKILL it) ends its own sandbox: that is the
// code's result, a 200 with status failed and ended_by agent_killed, for
// a one-shot run and for a session's exec, never a 503 telling the
// client to retry. The session is over afterwards.
func TestCodeKillsAgent(t *testing.T) {
	s := newStack(t, nil)
	kill := "echo before; kill -9 1; sleep 5; echo after"

	t.Run("one-shot", func(t *testing.T) {
		e, err := s.a.c.Execute(ctxFor(t, 2*time.Minute), airlock.ExecuteRequest{Language: airlock.Bash, Code: kill, Image: "python-ds"})
		if err != nil {
			t.Fatalf("a run whose code killed the agent: %v", err)
		}
		if e.Status != airlock.StatusFailed || e.EndedBy != airlock.EndedAgentKilled || e.ExitCode != 137 {
			t.Fatalf("status %s, ended_by %q, exit %d (%s)", e.Status, e.EndedBy, e.ExitCode, e.Error)
		}
		got, err := s.a.c.Execution(ctxFor(t, time.Minute), e.ID)
		if err != nil || got.Status != airlock.StatusFailed || got.EndedBy != airlock.EndedAgentKilled {
			t.Fatalf("record: %+v, %v", got, err)
		}
	})

	t.Run("session", func(t *testing.T) {
		sess := s.create(s.a, airlock.CreateSessionRequest{})
		e, err := s.a.c.Exec(ctxFor(t, 2*time.Minute), sess.ID, airlock.SessionExecRequest{Shell: kill})
		if err != nil {
			t.Fatalf("an exec whose code killed the agent: %v", err)
		}
		if e.Status != airlock.StatusFailed || e.EndedBy != airlock.EndedAgentKilled || e.ExitCode != 137 {
			t.Fatalf("status %s, ended_by %q, exit %d (%s)", e.Status, e.EndedBy, e.ExitCode, e.Error)
		}
		var st *airlock.Session
		ok := testreq.Poll(10*time.Second, func() bool {
			st, err = s.a.c.Session(ctxFor(t, time.Minute), sess.ID)
			return err == nil && !st.State.Live()
		})
		if !ok {
			t.Fatalf("the session lives on after its agent was killed: %+v, %v", st, err)
		}
		if st.EndReason != airlock.EndSandboxExited {
			t.Errorf("session end reason %q, want %q", st.EndReason, airlock.EndSandboxExited)
		}
	})

	t.Run("cell", func(t *testing.T) {
		sess := s.create(s.a, airlock.CreateSessionRequest{})
		cc, err := s.a.c.CreateContext(ctxFor(t, time.Minute), sess.ID, airlock.ContextPython)
		if err != nil {
			t.Fatal(err)
		}
		res, err := s.a.c.RunCell(ctxFor(t, 2*time.Minute), sess.ID, cc.ID, airlock.RunCellRequest{Code: "import os, time\nos.kill(1, 9)\ntime.sleep(5)"})
		if err != nil {
			t.Fatalf("a cell that killed the agent: %v", err)
		}
		if res.EndedBy != airlock.EndedAgentKilled || res.ContextState != airlock.ContextDead {
			t.Fatalf("cell result: ended_by %q, context %s", res.EndedBy, res.ContextState)
		}
		e, err := s.a.c.Execution(ctxFor(t, time.Minute), res.ExecutionID)
		if err != nil || e.Status != airlock.StatusFailed || e.EndedBy != airlock.EndedAgentKilled || e.ExitCode != 137 {
			t.Fatalf("record: %+v, %v", e, err)
		}
	})
}
