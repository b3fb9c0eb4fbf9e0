package session_test

import (
	"testing"
	"time"

	"github.com/airlockhq/airlock"
)

// A session its node abandons (the node lost its fleet membership) has
// its sandbox destroyed and its record lost, end reason node_lost; the
// node holds it no more.
func TestAbandon(t *testing.T) {
	s := newStack(t, nil)
	ctx := ctxFor(t, 2*time.Minute)
	sess, _, err := s.a.c.CreateSession(ctx, airlock.CreateSessionRequest{Image: "base", TimeoutS: 300})
	if err != nil {
		t.Fatal(err)
	}
	kept, _, err := s.a.c.CreateSession(ctx, airlock.CreateSessionRequest{Image: "base", TimeoutS: 300})
	if err != nil {
		t.Fatal(err)
	}
	held, err := s.mgr.Held(ctx)
	if err != nil || len(held) != 2 {
		t.Fatalf("held %v, %v; want both sessions", held, err)
	}
	if err := s.mgr.Abandon(ctx, sess.ID, "the node left the fleet"); err != nil {
		t.Fatal(err)
	}
	got, err := s.a.c.Session(ctx, sess.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != airlock.SessionLost || got.EndReason != airlock.EndNodeLost || got.EndDetail != "the node left the fleet" || got.EndedAt == nil {
		t.Fatalf("abandoned session: %s %s %q", got.State, got.EndReason, got.EndDetail)
	}
	if _, err := s.a.c.Exec(ctx, sess.ID, airlock.SessionExecRequest{Shell: "true"}); airlock.ErrorCode(err) != airlock.ECONFLICT {
		t.Errorf("exec in an abandoned session: %v, want a conflict (ended)", err)
	}
	if held, _ := s.mgr.Held(ctx); len(held) != 1 || held[0] != kept.ID {
		t.Errorf("held after abandoning one: %v, want [%s]", held, kept.ID)
	}
	// Abandoning it again, or one already gone, is no error.
	if err := s.mgr.Abandon(ctx, sess.ID, "again"); err != nil {
		t.Errorf("abandon twice: %v", err)
	}
}
