package e2e_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/internal/testenv"
)

// TestSessionSurvivesRestart kills airlockd with SIGKILL (airlockd alone,
// not its process group) while a session lives, with a file written, a
// variable set in a Python context and a long command running, starts it
// again on the same state directory, and finds the session live: the same
// ID and deadline, the file, the variable, and the command adopted, its
// record complete with the output from before and after the restart. A
// sandbox whose session record says it ended is removed at the start.
// Then the same through a clean stop (SIGTERM, which keeps sessions by
// default), and last a clean stop with --keep-sessions=false, which ends
// them and leaves nothing on the host.
func TestSessionSurvivesRestart(t *testing.T) {
	n := newTestNode(t, nodeOptions{name: "session-crash", images: []string{"base", "python-ds"}})
	tmp, parent, bin, runsc := n.dir, n.parent, n.bin, n.runsc
	// No warm pool: the sandboxes on the host are the sessions' alone.
	prefix := "sr" + testenv.RandomID()[:4]
	args := n.args("--pool-max", "0", "--warm", "", "--warm-sessions", "", "--no-snapshots", "--egress-prefix", prefix)

	d1 := n.track(startDaemon(t, bin, args))
	key := n.key()
	c := newClient(t, d1.url, key)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	sess, _, err := c.CreateSession(ctx, airlock.CreateSessionRequest{Image: "base", TimeoutS: 3600}, client.WithIdempotencyKey("crash-1"))
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
	py2, err := c.CreateContext(ctx, sess.ID, airlock.ContextPython)
	if err != nil {
		t.Fatal(err)
	}
	// A session with a network: it comes back with its network, served
	// by the new airlockd's proxy and resolver under its allow list.
	netSess, _, err := c.CreateSession(ctx, airlock.CreateSessionRequest{Image: "base",
		Network: &airlock.NetworkPolicy{Mode: airlock.NetworkAllowList, Allow: []string{"allowed.test"}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(ourNetworks(t, prefix)) == 0 {
		t.Fatal("the networked session has no network on the host")
	}
	// A second session, ended in the store while no server runs: its
	// sandbox must go at the next start.
	orphan, _, err := c.CreateSession(ctx, airlock.CreateSessionRequest{Image: "base"})
	if err != nil {
		t.Fatal(err)
	}

	restarts := []struct {
		name string
		stop func(*daemon)
	}{
		{"SIGKILL", func(d *daemon) { d.kill(t) }},
		{"SIGTERM", func(d *daemon) { d.stop(t) }},
	}
	d := d1
	for round, r := range restarts {
		mark := fmt.Sprintf("go%d", round)
		execDone := startLongExec(ctx, t, c, sess.ID, mark)
		// A cell running in a second context: the agent keeps no result
		// of a cell, so its record must say it was interrupted, and its
		// context must live on.
		cellMark := fmt.Sprintf("cellgo%d", round)
		cellDone := startLongCell(ctx, t, c, sess.ID, py2.ID, cellMark)
		r.stop(d)
		if err := <-cellDone; err == nil {
			t.Fatalf("%s: the cell returned a result after airlockd went", r.name)
		}
		if err := <-execDone; err == nil {
			t.Fatalf("%s: the exec returned a result after airlockd went", r.name)
		}
		if round == 0 {
			endInStore(t, tmp, orphan.ID)
			if left := observe(t, runsc, tmp, parent, 0); left.mentioning("ss-" + sess.ID).empty() {
				t.Fatalf("%s: the session's sandbox did not outlive airlockd", r.name)
			}
		}
		start := time.Now()
		d = n.track(startDaemon(t, bin, args))
		t.Logf("%s: airlockd served again %v after its start", r.name, time.Since(start).Round(time.Millisecond))
		c = newClient(t, d.url, key)
		got, err := c.Session(ctx, sess.ID)
		if err != nil || !got.State.Live() || !got.ExpiresAt.Equal(sess.ExpiresAt) {
			t.Fatalf("%s: session after the restart: %+v %v", r.name, got, err)
		}
		var out bytes.Buffer
		if _, err := c.GetFile(ctx, sess.ID, "w.txt", &out); err != nil || out.String() != "work" {
			t.Errorf("%s: file after the restart: %q %v", r.name, out.String(), err)
		}
		if res, err := c.RunCell(ctx, sess.ID, py.ID, airlock.RunCellRequest{Code: "x"}); err != nil || res.Value != "42" {
			t.Errorf("%s: the context's variable after the restart: %+v %v", r.name, res, err)
		}
		// The command ran on and is adopted: its record gets all of it.
		if _, err := c.Exec(ctx, sess.ID, airlock.SessionExecRequest{Shell: "touch /workspace/" + mark}); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 30*time.Second, r.name+": the adopted command's record", func() bool {
			page, err := c.ListExecutions(ctx, 0, "")
			if err != nil {
				return false
			}
			for _, e := range page.Executions {
				if e.Status == airlock.StatusRunning && e.Language == airlock.Bash {
					return false
				}
			}
			for _, e := range page.Executions {
				if e.ExitCode == 7 && e.Status == airlock.StatusCompleted {
					full, err := c.Execution(ctx, e.ID)
					if err == nil && full.Stdout == "before "+mark+"\nafter "+mark+"\n" {
						return true
					}
				}
			}
			return false
		})
		// The cell's record says it was interrupted; its context, once
		// the cell has ended, runs the next one.
		waitFor(t, 30*time.Second, r.name+": the interrupted cell's record", func() bool {
			page, err := c.ListExecutions(ctx, 0, "")
			if err != nil {
				return false
			}
			interrupted := 0 // one cell per round so far
			for _, e := range page.Executions {
				if e.SessionID == sess.ID && e.Language == airlock.Python && e.Status == airlock.StatusFailed &&
					strings.Contains(e.Error, "interrupted") {
					interrupted++
				}
			}
			return interrupted == round+1
		})
		if _, err := c.Exec(ctx, sess.ID, airlock.SessionExecRequest{Shell: "touch /workspace/" + cellMark}); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 30*time.Second, r.name+": the second context after its interrupted cell", func() bool {
			res, err := c.RunCell(ctx, sess.ID, py2.ID, airlock.RunCellRequest{Code: "21 * 2"})
			return err == nil && res.Value == "42"
		})
		// The networked session: its resolver answers again, refusing a
		// name off the list, and the new airlockd records that.
		denied := fmt.Sprintf("denied%d.test", round)
		if e, err := c.Exec(ctx, netSess.ID, airlock.SessionExecRequest{Shell: "getent hosts " + denied}); err != nil || e.ExitCode == 0 {
			t.Errorf("%s: a name off the list after the restart: %+v %v", r.name, e, err)
		}
		waitFor(t, 10*time.Second, r.name+": the egress log of the networked session", func() bool {
			page, err := c.SessionEgress(ctx, netSess.ID, airlock.EgressFilter{})
			if err != nil {
				return false
			}
			for _, ev := range page.Events {
				if ev.Name == denied && ev.Verdict == airlock.VerdictDenied {
					return true
				}
			}
			return false
		})
		if round == 0 {
			if got := observe(t, runsc, tmp, parent, d.pid()).mentioning("ss-" + orphan.ID); !got.empty() {
				t.Errorf("the sandbox of a session ended in the store is still on the host: %s", got)
			}
			// A retry with the first key names the same session.
			again, created, err := c.CreateSession(ctx, airlock.CreateSessionRequest{Image: "base", TimeoutS: 3600}, client.WithIdempotencyKey("crash-1"))
			if err != nil || created || again.ID != sess.ID {
				t.Errorf("retry after the restart: %+v created %v, %v", again, created, err)
			}
		}
	}

	// A clean stop that ends sessions leaves nothing behind.
	d.stop(t)
	noKeep := append(append([]string{}, args...), "--keep-sessions=false")
	d = n.track(startDaemon(t, bin, noKeep))
	c = newClient(t, d.url, key)
	if got, err := c.Session(ctx, sess.ID); err != nil || !got.State.Live() {
		t.Fatalf("session before the last stop: %+v %v", got, err)
	}
	d.stop(t)
	if after := observe(t, runsc, tmp, parent, 0); !after.empty() {
		t.Errorf("left after a clean stop that ends sessions: %s", after)
	}
	if nets := ourNetworks(t, prefix); len(nets) > 0 {
		t.Errorf("networks left after a clean stop that ends sessions: %v", nets)
	}
	d = n.track(startDaemon(t, bin, args))
	if got, err := newClient(t, d.url, key).Session(ctx, sess.ID); err != nil || got.EndReason != airlock.EndShutdown {
		t.Errorf("session ended by the clean stop: %+v %v", got, err)
	}
	d.stop(t)
}

// startLongExec starts a command in the session that prints, waits for
// the file mark, prints again and exits 7; it returns once the first line
// arrived, and the call's error comes on the channel.
func startLongExec(ctx context.Context, t *testing.T, c *client.Client, id, mark string) <-chan error {
	t.Helper()
	started := make(chan struct{})
	var once sync.Once
	done := make(chan error, 1)
	go func() {
		_, err := c.ExecStreaming(ctx, id, airlock.SessionExecRequest{
			Shell:      "echo before " + mark + "; while [ ! -e /workspace/" + mark + " ]; do sleep 0.05; done; echo after " + mark + "; exit 7",
			TimeoutSec: 600,
		}, client.ExecStream{Stdout: writerFunc(func([]byte) { once.Do(func() { close(started) }) })})
		done <- err
	}()
	select {
	case <-started:
	case err := <-done:
		t.Fatalf("the long command did not start: %v", err)
	case <-time.After(time.Minute):
		t.Fatal("the long command printed nothing within a minute")
	}
	return done
}

// startLongCell starts a cell in context cid that prints, then waits
// for the file mark; it returns once the first line arrived, and the
// call's error comes on the channel.
func startLongCell(ctx context.Context, t *testing.T, c *client.Client, id, cid, mark string) <-chan error {
	t.Helper()
	started := make(chan struct{})
	var once sync.Once
	done := make(chan error, 1)
	go func() {
		_, err := c.RunCellStreaming(ctx, id, cid, airlock.RunCellRequest{
			Code: "import os, time\nprint('cell " + mark + "', flush=True)\n" +
				"while not os.path.exists('/workspace/" + mark + "'):\n    time.sleep(0.05)\n",
			TimeoutSec: 600,
		}, writerFunc(func([]byte) { once.Do(func() { close(started) }) }), io.Discard)
		done <- err
	}()
	select {
	case <-started:
	case err := <-done:
		t.Fatalf("the long cell did not start: %v", err)
	case <-time.After(time.Minute):
		t.Fatal("the long cell printed nothing within a minute")
	}
	return done
}

// endInStore records a session as ended directly in the store of a
// stopped airlockd, as if its record were ended while its sandbox lived.
func endInStore(t *testing.T, stateDir, id string) {
	t.Helper()
	db, ctx := openStore(t, stateDir)
	defer db.Close()
	s, err := db.LiveSessions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range s {
		if x.ID == id {
			now := time.Now()
			x.State, x.EndedAt, x.EndReason = airlock.SessionFailed, &now, airlock.EndSandboxExited
			if err := db.UpdateSession(ctx, x); err != nil {
				t.Fatal(err)
			}
			return
		}
	}
	t.Fatalf("session %s is not live in the store", id)
}

// writerFunc is an io.Writer that calls f with every write.
type writerFunc func(p []byte)

func (f writerFunc) Write(p []byte) (int, error) {
	f(p)
	return len(p), nil
}
