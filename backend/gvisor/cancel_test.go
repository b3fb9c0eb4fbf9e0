package gvisor_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/testenv"
)

// TestCreateCancelledLeavesNothing cancels creates at points spread over
// a create's whole length (a request that gives up, a pool fill at
// shutdown): each create either returns a sandbox, which is destroyed,
// or an error, and either way nothing of it stays on the host, in
// runsc's records or in the backend's own list.
func TestCreateCancelledLeavesNothing(t *testing.T) {
	b := testenv.GVisor(t)
	img := testenv.Image(t, "base")
	spec := func() airlock.SandboxSpec {
		return airlock.SandboxSpec{ID: "t-" + testenv.RandomID(), Image: img,
			Limits: airlock.Limits{MemoryBytes: 256 << 20, DiskBytes: 64 << 20, Pids: 64}}
	}
	// How long one create takes here, to spread the cancels over it.
	start := time.Now()
	sb, err := b.Create(context.Background(), spec())
	if err != nil {
		t.Fatal(err)
	}
	full := time.Since(start)
	if err := sb.Destroy(context.Background()); err != nil {
		t.Fatal(err)
	}
	const steps = 16
	var cancelled int
	for i := 0; i < steps; i++ {
		after := full * time.Duration(i) / steps
		ctx, cancel := context.WithCancel(context.Background())
		timer := time.AfterFunc(after, cancel)
		sb, err := b.Create(ctx, spec())
		timer.Stop()
		cancel()
		if err != nil {
			cancelled++
			if !errors.Is(err, context.Canceled) {
				t.Logf("create cancelled after %v: %v", after, err)
			}
		} else if err := sb.Destroy(context.Background()); err != nil {
			t.Errorf("destroy of a create not cancelled in time (%v): %v", after, err)
		}
		if err := b.CheckClean(context.Background()); err != nil {
			t.Fatalf("create cancelled after %v of %v: host not clean: %v", after, full, err)
		}
	}
	t.Logf("a create took %v; %d of %d creates were cancelled before they ended", full, cancelled, steps)
}
