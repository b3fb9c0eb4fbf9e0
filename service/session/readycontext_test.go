package session_test

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/teststack"
	"github.com/airlockhq/airlock/service/provision"
)

// cloneCell prints what the sessions' Python contexts must not share
// although their sandboxes are restored from one snapshot in which the
// context had imported random already: random's generator (reseeded
// when the context is taken), a UUID, os.urandom and a secrets token
// (the sandbox kernel's entropy).
const cloneCell = `import json, os, random, secrets, uuid
print(json.dumps([random.random(), str(uuid.uuid4()), os.urandom(16).hex(), secrets.token_hex(16)]))`

// Sessions restored from the python-ds base snapshot hold a Python
// context started before them: their first context is that one (its ID
// is the snapshot's, the same in every clone), ready at once, and what is
// random in it differs between the clones.
func TestReadyContextClonesDiffer(t *testing.T) {
	s := newStackWith(t, teststack.Options{
		Snapshots: true, Pool: provision.PoolConfig{Disabled: true}, WarmSessions: []string{"python-ds/small"},
	})
	var first *airlock.Session
	waitFor(t, 4*time.Minute, "a session restored from the base snapshot", func() bool {
		first = s.create(s.a, airlock.CreateSessionRequest{Image: "python-ds"})
		if first.StartSource == airlock.StartRestore {
			return true
		}
		// Booted before the snapshot was there: not a clone.
		if _, err := s.a.c.DeleteSession(ctxFor(t, time.Minute), first.ID); err != nil {
			t.Fatal(err)
		}
		return false
	})
	sessions := []*airlock.Session{first}
	for i := 0; i < 3; i++ {
		sess := s.create(s.a, airlock.CreateSessionRequest{Image: "python-ds"})
		if sess.StartSource != airlock.StartRestore {
			t.Fatalf("clone %d started %s, want restore", i, sess.StartSource)
		}
		sessions = append(sessions, sess)
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	outs := make([]string, len(sessions))
	ids := make([]string, len(sessions))
	for i, sess := range sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := ctxFor(t, 2*time.Minute)
			py, err := s.a.c.CreateContext(ctx, sess.ID, airlock.ContextPython)
			if err != nil {
				t.Errorf("context of %s: %v", sess.ID, err)
				return
			}
			cell, err := s.a.c.RunCell(ctx, sess.ID, py.ID, airlock.RunCellRequest{Code: cloneCell})
			if err != nil || cell.Error != nil {
				t.Errorf("cell in %s: %+v %v", sess.ID, cell, err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			outs[i], ids[i] = strings.TrimSpace(cell.Stdout), py.ID
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	for i, id := range ids {
		if id != ids[0] {
			t.Errorf("session %d's context %s is not the snapshot's (%s): it was not taken ready", i, id, ids[0])
		}
	}
	teststack.CheckClonesDiffer(t, outs)

	// A second Python context of a session is a fresh interpreter.
	ctx := ctxFor(t, time.Minute)
	second, err := s.a.c.CreateContext(ctx, first.ID, airlock.ContextPython)
	if err != nil || second.ID == ids[0] {
		t.Fatalf("a second context: %+v %v", second, err)
	}
	cs, err := s.a.c.ListContexts(ctx, first.ID)
	if err != nil || len(cs) != 2 {
		t.Errorf("contexts of the session: %+v %v", cs, err)
	}
}

// Pool members restored from the base snapshot have their ready context
// reseeded while they wait in the pool, so that a session takes it
// without waiting for a reseed: what is random in it still differs
// between the clones. A member counts as a clone when its context has
// the snapshot's ID (a member booted before the snapshot existed has a
// context of its own).
func TestReadyContextClonesDifferFromPool(t *testing.T) {
	s := newStackWith(t, teststack.Options{
		Snapshots: true, Pool: provision.PoolConfig{Min: 1, Max: 2}, WarmSessions: []string{"python-ds/small"},
	})
	const clones = 4
	outs := map[string][]string{} // by context ID
	var done []string
	waitFor(t, 5*time.Minute, "four sessions from pool members restored from one snapshot", func() bool {
		ctx := ctxFor(t, 2*time.Minute)
		sess := s.create(s.a, airlock.CreateSessionRequest{Image: "python-ds"})
		defer func() {
			if _, err := s.a.c.DeleteSession(ctx, sess.ID); err != nil {
				t.Fatal(err)
			}
		}()
		if sess.StartSource != airlock.StartPool {
			return false
		}
		py, err := s.a.c.CreateContext(ctx, sess.ID, airlock.ContextPython)
		if err != nil {
			t.Fatalf("context of %s: %v", sess.ID, err)
		}
		cell, err := s.a.c.RunCell(ctx, sess.ID, py.ID, airlock.RunCellRequest{Code: cloneCell})
		if err != nil || cell.Error != nil {
			t.Fatalf("cell in %s: %+v %v", sess.ID, cell, err)
		}
		outs[py.ID] = append(outs[py.ID], strings.TrimSpace(cell.Stdout))
		if len(outs[py.ID]) == clones {
			done = outs[py.ID]
			return true
		}
		return false
	})
	teststack.CheckClonesDiffer(t, done)
}
