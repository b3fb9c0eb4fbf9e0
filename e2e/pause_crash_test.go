package e2e_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/testenv"
)

// Pause a session, kill -9 airlockd, start it again, resume: the session,
// its files and its Python variables are back. A snapshot sealed by the
// first process (master key from a file) restores in the second.
func TestPauseSurvivesKill(t *testing.T) {
	n := newTestNode(t, nodeOptions{name: "pause-crash"})
	tmp, bin := n.dir, n.bin
	keyFile := filepath.Join(tmp, "master.key")
	if err := os.WriteFile(keyFile, []byte(strings.Repeat("ab", 32)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	args := n.args("--pool-max", "0", "--warm", "", "--warm-sessions", "", "--no-snapshots", "--egress-prefix", "pk"+testenv.RandomID()[:4],
		"--master-key-file", keyFile)
	d1 := n.track(startDaemon(t, bin, args))
	key := n.key()
	c := newClient(t, d1.url, key)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	sess, _, err := c.CreateSession(ctx, airlock.CreateSessionRequest{Image: "base", TimeoutS: 3600})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.PutFile(ctx, sess.ID, "w.txt", strings.NewReader("work"), 4); err != nil {
		t.Fatal(err)
	}
	py, err := c.CreateContext(ctx, sess.ID, airlock.ContextPython)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.RunCell(ctx, sess.ID, py.ID, airlock.RunCellRequest{Code: "x = 41 + 1"}); err != nil {
		t.Fatal(err)
	}
	snap, err := c.CreateSnapshot(ctx, sess.ID, airlock.CreateSnapshotRequest{Name: "before"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.PauseSession(ctx, sess.ID); err != nil {
		t.Fatal(err)
	}
	d1.kill(t)

	d2 := n.track(startDaemon(t, bin, args))
	c = newClient(t, d2.url, key)
	got, err := c.Session(ctx, sess.ID)
	if err != nil || got.State != airlock.SessionPaused {
		t.Fatalf("after kill -9 and start: %+v %v\n%s", got, err, d2.logs())
	}
	if _, err := c.ResumeSession(ctx, sess.ID); err != nil {
		t.Fatalf("resume: %v\n%s", err, d2.logs())
	}
	r, err := c.RunCell(ctx, sess.ID, py.ID, airlock.RunCellRequest{Code: "print(x, open('w.txt').read())"})
	if err != nil || r.Stdout != "42 work\n" {
		t.Fatalf("after resume: %+v %v", r, err)
	}
	// The resumed session is an ordinary live one: it survives the next
	// kill -9 as any other, its sandbox reattached.
	d2.kill(t)
	d3 := n.track(startDaemon(t, bin, args))
	d2 = d3
	c = newClient(t, d3.url, key)
	r, err = c.RunCell(ctx, sess.ID, py.ID, airlock.RunCellRequest{Code: "print(x + 1)"})
	if err != nil || r.Stdout != "43\n" {
		t.Fatalf("after resume and another kill -9: %+v %v\n%s", r, err, d3.logs())
	}
	restored, _, err := c.CreateSession(ctx, airlock.CreateSessionRequest{FromSnapshot: snap.ID})
	if err != nil {
		t.Fatalf("restore a snapshot of the first process: %v", err)
	}
	if e, err := c.Exec(ctx, restored.ID, airlock.SessionExecRequest{Shell: "cat w.txt"}); err != nil || e.Stdout != "work" {
		t.Fatalf("restored: %+v %v", e, err)
	}
	for _, id := range []string{sess.ID, restored.ID} {
		if _, err := c.DeleteSession(ctx, id); err != nil {
			t.Error(err)
		}
	}
	d2.stop(t)
}
