package e2e_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/testenv"
	"github.com/airlockhq/airlock/store/sqlite"
)

// TestNamespacesSessionEndsWithRestart: a session on the namespaces
// backend cannot outlive airlockd (its sandboxes are airlockd's
// children and speak over its pipes). After SIGKILL the next start
// records it as ended with end_reason server_restarted and leaves
// nothing of it on the host; a clean stop, which keeps gVisor sessions,
// ends a namespaces session with end_reason shutdown, and leaves nothing
// either.
func TestNamespacesSessionEndsWithRestart(t *testing.T) {
	n := newTestNode(t, nodeOptions{name: "ns-restart", parents: []string{"-namespaces"}})
	tmp, parent, bin := n.dir, n.parent, n.bin
	args := n.args("--namespaces", "--pool-max", "0", "--warm", "", "--warm-sessions", "", "--no-snapshots",
		"--egress-prefix", "nr"+testenv.RandomID()[:4])

	d := n.track(startDaemon(t, bin, args))
	key := n.key()
	withTenant(t, tmp, "default", func(ctx context.Context, db *sqlite.DB, tenantID string) error {
		return db.SetTenantFirstParty(ctx, tenantID, true)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	for _, r := range []struct {
		name   string
		stop   func(*daemon)
		reason string
	}{
		{"SIGKILL", func(d *daemon) { d.kill(t) }, airlock.EndServerRestarted},
		{"SIGTERM", func(d *daemon) { d.stop(t) }, airlock.EndShutdown},
	} {
		c := newClient(t, d.url, key)
		sess, _, err := c.CreateSession(ctx, airlock.CreateSessionRequest{Image: "base", Isolation: airlock.IsolationContainer})
		if err != nil {
			t.Fatalf("%s: create a namespaces session: %v", r.name, err)
		}
		if sess.Backend != "namespaces" {
			t.Fatalf("%s: the session runs on %q, want namespaces", r.name, sess.Backend)
		}
		if e, err := c.Exec(ctx, sess.ID, airlock.SessionExecRequest{Shell: "echo up"}); err != nil || e.Stdout != "up\n" {
			t.Fatalf("%s: exec: %+v %v", r.name, e, err)
		}
		r.stop(d)
		d = n.track(startDaemon(t, bin, args))
		c = newClient(t, d.url, key)
		got, err := c.Session(ctx, sess.ID)
		if err != nil || got.State.Live() || got.EndReason != r.reason {
			t.Errorf("%s: the namespaces session after the restart: %+v %v, want ended with %s", r.name, got, err, r.reason)
		}
		waitFor(t, 30*time.Second, r.name+": nothing of the namespaces sandbox left", func() bool {
			return len(cgroupChildren(parent+"-namespaces")) == 0 && len(mountsUnder(t, filepath.Join(tmp, "namespaces", "sandboxes"))) == 0
		})
	}
	d.stop(t)
}
