package e2e_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/internal/testenv"
)

// TestSessionCrashRecovery kills airlockd with SIGKILL while a session
// lives (with a command running in it), starts it again on the same state
// directory, and checks that the session's sandbox is gone from the host,
// that its record says it was ended by the restart, that its running exec
// is recorded as failed, and that sessions work on the new server. Then a
// clean stop ends a live session and leaves nothing.
func TestSessionCrashRecovery(t *testing.T) {
	testenv.RequireRoot(t)
	runsc := testenv.RequireRunsc(t)
	testenv.Image(t, "base")
	testenv.Image(t, "python-ds")
	agent := testenv.Agent(t)
	tmp, err := os.MkdirTemp("", "airlock-session-crash-")
	if err != nil {
		t.Fatal(err)
	}
	parent := "airlock-crash-" + testenv.RandomID()
	var daemons []*daemon
	t.Cleanup(func() { crashCleanup(t, tmp, parent, daemons) })
	bin := buildAirlockd(t, tmp)
	shareImages(t, filepath.Join(testenv.StateDir(), "images"), filepath.Join(tmp, "images"))
	// No warm pool: the sandboxes on the host are the session's alone.
	args := []string{"--listen", "127.0.0.1:0", "--state-dir", tmp, "--agent", agent, "--cgroup-parent", parent, "--pool-max", "0", "--warm", ""}

	d1 := startDaemon(t, bin, args)
	daemons = append(daemons, d1)
	keyBytes, err := os.ReadFile(filepath.Join(tmp, "default.key"))
	if err != nil {
		t.Fatal(err)
	}
	key := strings.TrimSpace(string(keyBytes))
	c1 := newClient(t, d1.url, key)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	sess, _, err := c1.CreateSession(ctx, airlock.CreateSessionRequest{Image: "base"}, client.WithIdempotencyKey("crash-1"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c1.Exec(ctx, sess.ID, airlock.SessionExecRequest{Shell: "echo work > w.txt"}); err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{})
	var once sync.Once
	execDone := make(chan error, 1)
	go func() {
		_, err := c1.ExecStreaming(ctx, sess.ID, airlock.SessionExecRequest{Shell: "echo running; sleep 120"},
			client.ExecStream{Stdout: writerFunc(func([]byte) { once.Do(func() { close(started) }) })})
		execDone <- err
	}()
	<-started

	d1.kill(t)
	if err := <-execDone; err == nil {
		t.Fatal("the exec returned a result after airlockd was killed")
	}
	left := observe(t, runsc, tmp, parent, 0)
	if !left.mentioning("ss-" + sess.ID).empty() {
		t.Logf("left by the crash for the session: %s", left.mentioning("ss-"+sess.ID))
	}

	d2 := startDaemon(t, bin, args)
	daemons = append(daemons, d2)
	now := observe(t, runsc, tmp, parent, d2.pid())
	if got := now.mentioning("ss-" + sess.ID); !got.empty() {
		t.Errorf("the session's sandbox is still on the host after the restart: %s", got)
	}
	c2 := newClient(t, d2.url, key)
	got, err := c2.Session(ctx, sess.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != airlock.SessionDestroyed || got.EndReason != airlock.EndServerRestarted || got.EndedAt == nil {
		t.Fatalf("session after the restart: state %s, end %q (%s)", got.State, got.EndReason, got.EndDetail)
	}
	t.Logf("session after the restart: %s, %s: %s", got.State, got.EndReason, got.EndDetail)
	page, err := c2.ListExecutions(ctx, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	var running int
	for _, e := range page.Executions {
		if e.SessionID == sess.ID && e.Status == airlock.StatusRunning {
			running++
		}
	}
	if running != 0 || len(page.Executions) != 2 {
		t.Errorf("session executions after the restart: %d listed, %d still running", len(page.Executions), running)
	}
	_, err = c2.Exec(ctx, sess.ID, airlock.SessionExecRequest{Shell: "cat w.txt"})
	if airlock.ErrorCode(err) != airlock.ECONFLICT {
		t.Errorf("exec in the ended session: %v, want a session-ended problem", err)
	}
	// A retry with the first key names the ended session, not a new one.
	again, created, err := c2.CreateSession(ctx, airlock.CreateSessionRequest{Image: "base"}, client.WithIdempotencyKey("crash-1"))
	if err != nil || created || again.ID != sess.ID {
		t.Errorf("retry after the restart: %+v created %v, %v", again, created, err)
	}

	// The new server makes sessions; a clean stop ends them and leaves
	// nothing behind.
	fresh, _, err := c2.CreateSession(ctx, airlock.CreateSessionRequest{Image: "base"})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if _, err := c2.PutFile(ctx, fresh.ID, "x", strings.NewReader("ok"), 2); err != nil {
		t.Fatal(err)
	}
	if _, err := c2.GetFile(ctx, fresh.ID, "x", &out); err != nil || out.String() != "ok" {
		t.Fatalf("files on the new server: %q %v", out.String(), err)
	}
	d2.stop(t)
	if after := observe(t, runsc, tmp, parent, 0); !after.empty() {
		t.Errorf("left after a clean stop: %s", after)
	}
	d3 := startDaemon(t, bin, args)
	daemons = append(daemons, d3)
	if got, err := newClient(t, d3.url, key).Session(ctx, fresh.ID); err != nil || got.EndReason != airlock.EndShutdown {
		t.Errorf("session ended by the clean stop: %+v %v", got, err)
	}
	d3.stop(t)
}

// writerFunc is an io.Writer that calls f with every write.
type writerFunc func(p []byte)

func (f writerFunc) Write(p []byte) (int, error) {
	f(p)
	return len(p), nil
}
