package gvisor_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/testenv"
)

// A sandbox paused and resumed again and again keeps its files (workspace
// and /tmp) and its processes, and what each round wrote; its directory
// and disk are gone while it is paused.
func TestPauseResume(t *testing.T) {
	b := testenv.GVisor(t)
	img := testenv.Image(t, "base")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	spec := func() airlock.SandboxSpec {
		return airlock.SandboxSpec{ID: "t-" + testenv.RandomID(), Image: img, Limits: airlock.DefaultLimits}
	}
	sb, err := b.Create(ctx, spec())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sb.Destroy(context.Background()) })
	run(t, sb, "sh", "-c", "echo start > /workspace/log; echo tmp > /tmp/t; setsid sh -c 'echo $$ > /workspace/pid; exec sleep 100000' </dev/null >/dev/null 2>&1 & sleep 0.2")
	pid, _, _ := run(t, sb, "cat", "/workspace/pid")
	if out, _, _ := run(t, sb, "sh", "-c", "kill -0 $(cat /workspace/pid) && echo alive"); out != "alive\n" {
		t.Fatalf("the background process is not running before the pause: %q", out)
	}
	for i := 0; i < 3; i++ {
		dir := filepath.Join(t.TempDir(), "paused")
		old := sb
		if err := b.Pause(ctx, old, dir); err != nil {
			t.Fatalf("pause %d: %v", i, err)
		}
		if _, err := os.Stat(filepath.Dir(old.WorkspaceDir())); !os.IsNotExist(err) {
			t.Errorf("pause %d: the paused sandbox's disk is still mounted (%v)", i, err)
		}
		sb, err = b.Resume(ctx, spec(), dir)
		if err != nil {
			t.Fatalf("resume %d: %v", i, err)
		}
		os.RemoveAll(dir)
		run(t, sb, "sh", "-c", fmt.Sprintf("echo round%d >> /workspace/log", i))
		out, _, _ := run(t, sb, "sh", "-c", "cat /workspace/log /tmp/t; kill -0 $(cat /workspace/pid) && echo alive")
		want := "start\n"
		for j := 0; j <= i; j++ {
			want += fmt.Sprintf("round%d\n", j)
		}
		want += "tmp\nalive\n"
		if out != want {
			t.Fatalf("after resume %d: %q, want %q", i, out, want)
		}
	}
	if p2, _, _ := run(t, sb, "cat", "/workspace/pid"); p2 != pid {
		t.Errorf("pid file %q, want %q", p2, pid)
	}
	if strings.TrimSpace(pid) == "" {
		t.Error("no pid")
	}
}
