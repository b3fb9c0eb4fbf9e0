package conformance

import (
	"context"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/testenv/testreq"
)

// notReattachable is why a backend whose sandboxes cannot outlive the
// server skips the reattach case.
const notReattachable = "the backend's sandboxes cannot outlive the server (it is no airlock.Reattacher): a restart ends them, which the server records"

var lifecycleCases = []Case{
	{Group: Lifecycle, Name: "detach-reattach",
		Want: "a detached sandbox keeps running with its files, and Reattach by its ID gives a sandbox whose agent answers with them; an unknown ID is an error, not a sandbox",
		Run: func(t *testing.T, e *Env) {
			ra, ok := e.b.(airlock.Reattacher)
			if !ok {
				testreq.NotApplicable(t, notReattachable)
			}
			sb := e.Sandbox(nil)
			if r := e.Sh(sb, "echo kept > /workspace/kept && echo tmp > /tmp/kept"); r.Status.Code != 0 {
				t.Fatalf("write files: %s", r)
			}
			d, ok := sb.(airlock.Detacher)
			if !ok {
				t.Fatal("the backend is an airlock.Reattacher but its sandbox is no airlock.Detacher")
			}
			if err := d.Detach(); err != nil {
				t.Fatalf("detach: %v", err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			again, err := ra.Reattach(ctx, sb.ID())
			if err != nil {
				e.forget(sb)
				t.Fatalf("reattach %s: %v", sb.ID(), err)
			}
			e.replace(sb, again)
			if again.ID() != sb.ID() {
				t.Errorf("the reattached sandbox is %q, want %q", again.ID(), sb.ID())
			}
			if r := e.Sh(again, "cat /workspace/kept /tmp/kept"); r.Status.Code != 0 || r.Stdout != "kept\ntmp\n" {
				t.Fatalf("files after reattaching: %s", r)
			}
			if _, err := ra.Reattach(ctx, "cf-"+randomHex(6)); err == nil {
				t.Fatal("Reattach of an ID the backend never made returned a sandbox")
			}
		}},
}

// replace swaps a case's sandbox for the one that took its place (a
// reattached sandbox), so that the case's end destroys the new one.
func (e *Env) replace(old, now airlock.Sandbox) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for i, sb := range e.sandboxes {
		if sb == old {
			e.sandboxes[i] = now
			return
		}
	}
	e.sandboxes = append(e.sandboxes, now)
}

// forget drops a sandbox the case can no longer reach (detached and not
// reattached): the host check after the case then reports what is left.
func (e *Env) forget(old airlock.Sandbox) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for i, sb := range e.sandboxes {
		if sb == old {
			e.sandboxes = append(e.sandboxes[:i], e.sandboxes[i+1:]...)
			return
		}
	}
}
