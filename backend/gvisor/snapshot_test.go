package gvisor_test

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/agent/protocol"
	"github.com/airlockhq/airlock/backend/gvisor"
	"github.com/airlockhq/airlock/internal/testenv"
)

func TestCheckpointRestore(t *testing.T) {
	b := testenv.GVisor(t)
	img := testenv.Image(t, "base")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	spec := func() airlock.SandboxSpec {
		return airlock.SandboxSpec{ID: "t-" + testenv.RandomID(), Image: img, Limits: airlock.DefaultLimits}
	}
	sb, err := b.Create(ctx, spec())
	if err != nil {
		t.Fatal(err)
	}
	if err := sb.Agent().Prepare(ctx, protocol.PrepareRequest{Runtime: protocol.RuntimePython, Preload: []string{"random"}}); err != nil {
		sb.Destroy(ctx)
		t.Fatalf("prepare: %v", err)
	}
	dir := filepath.Join(t.TempDir(), "ckpt")
	if err := b.Checkpoint(ctx, sb, dir); err != nil {
		t.Fatalf("checkpoint: %v", err)
	}
	seen := map[string]bool{}
	for i := 0; i < 3; i++ {
		start := time.Now()
		r, err := b.Restore(ctx, spec(), dir)
		if err != nil {
			t.Fatalf("restore %d: %v", i, err)
		}
		t.Logf("restore %d took %v", i, time.Since(start))
		if _, err := r.Agent().Put(ctx, "/tmp/.airlock/main.py", 0o644, strings.NewReader("import random\nprint(random.random())\n")); err != nil {
			r.Destroy(ctx)
			t.Fatal(err)
		}
		var out, errb bytes.Buffer
		p, err := r.Agent().Exec(ctx, protocol.ExecRequest{Argv: []string{"python3", "/tmp/.airlock/main.py"}, Warm: true}, &out, &errb)
		if err != nil {
			r.Destroy(ctx)
			t.Fatal(err)
		}
		st, err := p.Wait(ctx)
		if err != nil || st.Code != 0 {
			t.Errorf("restored clone %d: %+v %v %q", i, st, err, errb.String())
		}
		if seen[out.String()] {
			t.Errorf("clone %d printed the same random number as an earlier clone: %q", i, out.String())
		}
		seen[out.String()] = true
		if err := r.Destroy(ctx); err != nil {
			t.Error(err)
		}
	}
	var _ airlock.Snapshotter = (*gvisor.Backend)(nil)
}
