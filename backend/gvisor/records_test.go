package gvisor_test

import (
	"context"
	"testing"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/backend/gvisor"
)

// TestDestroyRemovesRecordWithoutRunsc checks that destroying a sandbox
// whose processes are gone removes runsc's record without a `runsc
// delete`, and that nothing is left (the backend's clean check at the
// end of the test: runsc lists no container, no cgroup, directory, mount
// or process).
func TestDestroyRemovesRecordWithoutRunsc(t *testing.T) {
	sb := newSandbox(t, "base", airlock.DefaultLimits)
	if out, _, st := run(t, sb, "echo", "hi"); out != "hi\n" || st.Code != 0 {
		t.Fatalf("echo: %q %v", out, st)
	}
	before := gvisor.DirectRecordRemovals()
	if err := sb.Destroy(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := gvisor.DirectRecordRemovals() - before; got != 1 {
		t.Fatalf("direct record removals: %d, want 1 (runsc delete ran instead)", got)
	}
}
