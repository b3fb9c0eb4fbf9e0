package e2e_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/testenv"
)

// TestPooledSessionSurvivesRestart is the restart test with airlockd's
// default shape: sessions come from a warm pool, whose sandboxes are
// named for the pool, not for the session that takes them. Such a
// session must come back after SIGKILL and after SIGTERM exactly like
// one that booted for itself: the same sandbox (found by the ID its
// record keeps), with its file and its Python variable; and the pool
// member readied after it is not mistaken for a session's sandbox.
func TestPooledSessionSurvivesRestart(t *testing.T) {
	n := newTestNode(t, nodeOptions{name: "pool-crash"})
	tmp, parent, bin, runsc := n.dir, n.parent, n.bin, n.runsc
	args := n.args("--warm", "", "--warm-sessions", "base/small", "--pool-min", "1", "--pool-max", "1", "--no-snapshots",
		"--egress-prefix", "pc"+testenv.RandomID()[:4])

	d := n.track(startDaemon(t, bin, args))
	key := n.key()
	c := newClient(t, d.url, key)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	// The pool readies its member in the background: wait until the
	// node counts it ready before asking for a session.
	waitPoolReady(t, d)
	sess, _, err := c.CreateSession(ctx, airlock.CreateSessionRequest{Image: "base", TimeoutS: 3600})
	if err != nil {
		t.Fatal(err)
	}
	if sess.StartSource != "pool" {
		t.Fatalf("the session's sandbox came from %q, want the pool", sess.StartSource)
	}
	if _, err := c.PutFile(ctx, sess.ID, "w.txt", strings.NewReader("pooled"), 6); err != nil {
		t.Fatal(err)
	}
	py, err := c.CreateContext(ctx, sess.ID, airlock.ContextPython)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.RunCell(ctx, sess.ID, py.ID, airlock.RunCellRequest{Code: "y = 6 * 7"}); err != nil {
		t.Fatal(err)
	}

	for _, r := range []struct {
		name string
		stop func(*daemon)
	}{
		{"SIGKILL", func(d *daemon) { d.kill(t) }},
		{"SIGTERM", func(d *daemon) { d.stop(t) }},
	} {
		r.stop(d)
		d = n.track(startDaemon(t, bin, args))
		c = newClient(t, d.url, key)
		got, err := c.Session(ctx, sess.ID)
		if err != nil || !got.State.Live() || !got.ExpiresAt.Equal(sess.ExpiresAt) {
			t.Fatalf("%s: session after the restart: %+v %v\n%s", r.name, got, err, d.logs())
		}
		var out bytes.Buffer
		if _, err := c.GetFile(ctx, sess.ID, "w.txt", &out); err != nil || out.String() != "pooled" {
			t.Errorf("%s: file after the restart: %q %v", r.name, out.String(), err)
		}
		if res, err := c.RunCell(ctx, sess.ID, py.ID, airlock.RunCellRequest{Code: "y"}); err != nil || res.Value != "42" {
			t.Errorf("%s: the context's variable after the restart: %+v %v", r.name, res, err)
		}
	}
	// Its sandbox is the one it took from the pool, reattached, not a
	// new one; the pool's next member is the only other on the host.
	waitPoolReady(t, d)
	var pooled []string
	waitFor(t, 30*time.Second, "the session's sandbox and one ready member, no other", func() bool {
		pooled = pooled[:0]
		for _, id := range observe(t, runsc, tmp, parent, d.pid()).containers {
			if strings.HasPrefix(id, "pool-") {
				pooled = append(pooled, id)
			}
		}
		return len(pooled) == 2
	})
	if _, err := c.DeleteSession(ctx, sess.ID); err != nil {
		t.Fatal(err)
	}
	d.stop(t)
}

// waitPoolReady waits until airlockd's metrics count a ready pool member
// of agent-only (session) sandboxes.
func waitPoolReady(t *testing.T, d *daemon) {
	t.Helper()
	waitFor(t, 90*time.Second, "a ready pool member", func() bool {
		resp, err := http.Get(d.url + "/metrics")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		for _, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(line, "airlock_pool_size{") && strings.Contains(line, `language="agent"`) &&
				!strings.HasSuffix(line, " 0") {
				return true
			}
		}
		return false
	})
}
