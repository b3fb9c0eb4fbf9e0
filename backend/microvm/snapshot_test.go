package microvm_test

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/agent/protocol"
	"github.com/airlockhq/airlock/internal/testenv"
)

// A booted guest with a warm Python is checkpointed (QEMU's state
// migrated to a file, the scratch disk copied) and restored three
// times: each clone runs, keeps what the original wrote, and draws
// random numbers of its own (the clone-uniqueness check of the gVisor
// backend's snapshots).
func TestCheckpointRestore(t *testing.T) {
	b := testenv.MicroVM(t)
	img := testenv.Image(t, "base")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	spec := func() airlock.SandboxSpec {
		return airlock.SandboxSpec{ID: "ck-" + testenv.RandomID(), Image: img, Limits: airlock.DefaultLimits}
	}
	sb, err := b.Create(ctx, spec())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sb.Agent().Put(ctx, "/workspace/kept.txt", 0o644, strings.NewReader("from the original\n")); err != nil {
		sb.Destroy(ctx)
		t.Fatal(err)
	}
	if err := sb.Agent().Prepare(ctx, protocol.PrepareRequest{Runtime: protocol.RuntimePython, Preload: []string{"random"}}); err != nil {
		sb.Destroy(ctx)
		t.Fatalf("prepare: %v", err)
	}
	dir := filepath.Join(t.TempDir(), "ckpt")
	start := time.Now()
	if err := b.Checkpoint(ctx, sb, dir); err != nil {
		t.Fatalf("checkpoint: %v", err)
	}
	t.Logf("checkpoint took %v", time.Since(start))
	seen := map[string]bool{}
	for i := 0; i < 3; i++ {
		start := time.Now()
		r, err := b.Restore(ctx, spec(), dir)
		if err != nil {
			t.Fatalf("restore %d: %v", i, err)
		}
		t.Logf("restore %d to the agent's answer took %v", i, time.Since(start))
		if _, err := r.Agent().Put(ctx, "/tmp/.airlock/main.py", 0o644, strings.NewReader("import random\nprint(random.random(), open('/workspace/kept.txt').read().strip())\n")); err != nil {
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
		if err != nil || st.Code != 0 || !strings.HasSuffix(strings.TrimSpace(out.String()), " from the original") {
			t.Errorf("restored clone %d: %+v %v %q %q", i, st, err, out.String(), errb.String())
		}
		if seen[out.String()] {
			t.Errorf("clone %d printed the same random number as an earlier clone: %q", i, out.String())
		}
		seen[out.String()] = true
		if err := r.Destroy(ctx); err != nil {
			t.Error(err)
		}
	}
	if err := b.CheckClean(ctx); err != nil {
		t.Fatal(err)
	}
}
