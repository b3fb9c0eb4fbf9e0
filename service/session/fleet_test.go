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
	// One the fleet already recorded lost (the reaper came first) is
	// still held while its sandbox is here, and abandoning it removes
	// that; the reaper's record stays.
	rec, err := s.store.Session(ctx, s.a.tenant.ID, kept.ID)
	if err != nil {
		t.Fatal(err)
	}
	rec.State, rec.EndReason, rec.EndDetail = airlock.SessionLost, airlock.EndNodeLost, "reaped"
	if err := s.store.UpdateSession(ctx, rec); err != nil {
		t.Fatal(err)
	}
	if held, _ := s.mgr.Held(ctx); len(held) != 1 || held[0] != kept.ID {
		t.Fatalf("held after the reaper: %v, want [%s] (its sandbox is still here)", held, kept.ID)
	}
	if err := s.mgr.Abandon(ctx, kept.ID, "the node left the fleet"); err != nil {
		t.Fatal(err)
	}
	if held, _ := s.mgr.Held(ctx); len(held) != 0 {
		t.Errorf("held after abandoning all: %v", held)
	}
	if got, _ := s.a.c.Session(ctx, kept.ID); got == nil || got.State != airlock.SessionLost || got.EndDetail != "reaped" {
		t.Errorf("the reaped session after its node abandoned it: %+v", got)
	}
	// Abandoning it again, or one already gone, is no error.
	if err := s.mgr.Abandon(ctx, sess.ID, "again"); err != nil {
		t.Errorf("abandon twice: %v", err)
	}
}
