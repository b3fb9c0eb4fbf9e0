package e2e_test

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/testenv"
)

// tmuxServer is a tmux server of the test's own (its own socket), killed
// at the end.
type tmuxServer struct {
	t    *testing.T
	sock string
}

func newTmux(t *testing.T) *tmuxServer {
	t.Helper()
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Skip("tmux is not installed (scripts/setup.sh --tests installs it)")
	}
	m := &tmuxServer{t: t, sock: filepath.Join(t.TempDir(), "tmux.sock")}
	t.Cleanup(func() { exec.Command("tmux", "-S", m.sock, "kill-server").Run() })
	return m
}

func (m *tmuxServer) run(args ...string) string {
	m.t.Helper()
	out, err := exec.Command("tmux", append([]string{"-S", m.sock}, args...)...).CombinedOutput()
	if err != nil {
		m.t.Fatalf("tmux %v: %v: %s", args, err, out)
	}
	return string(out)
}

// screen is what the pane shows, its lines joined (tmux wraps long lines).
func (m *tmuxServer) screen() string {
	m.t.Helper()
	return m.run("capture-pane", "-p", "-J", "-t", "t")
}

// waitScreen waits until the pane shows s ("" for anything).
func (m *tmuxServer) waitScreen(s string) {
	m.t.Helper()
	deadline := time.Now().Add(90 * time.Second) // generous: a loaded machine
	for {
		out := m.screen()
		if strings.Contains(out, s) && strings.TrimSpace(out) != "" {
			return
		}
		if time.Now().After(deadline) {
			m.t.Fatalf("the pane never showed %q; it shows:\n%s", s, out)
		}
		// tmux offers no wait for output: poll the pane, briefly.
		time.Sleep(50 * time.Millisecond)
	}
}

// TestCLIShell drives airlock shell in tmux as a user would: the shell's
// prompt, typed commands, Ctrl-C reaching the sandbox's program (raw
// mode), a resize of the window reaching the sandbox's terminal
// (SIGWINCH), the shell's exit status as airlock's, and the terminal
// restored afterwards.
func TestCLIShell(t *testing.T) {
	testenv.RequireRoot(t)
	m := newTmux(t)
	s := newStack(t, cold)
	defer s.close(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	sess, _, err := s.a.client.CreateSession(ctx, airlock.CreateSessionRequest{Image: "base"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.a.client.DeleteSession(context.Background(), sess.ID)
	cli := buildCLI(t, t.TempDir())

	script := cli + " shell --url " + s.url + " --key " + s.a.key + " " + sess.ID +
		"; echo airlock-exit=$?; stty -a | tr ' ' '\\n' | grep -x -- '-\\?icanon' | sed 's/^/mode:/'; sleep 600"
	m.run("new-session", "-d", "-s", "t", "-x", "100", "-y", "30", "sh", "-c", script)
	m.waitScreen("") // the shell's prompt
	m.run("send-keys", "-t", "t", "echo hi-$((40+2))", "Enter")
	m.waitScreen("hi-42")
	m.run("send-keys", "-t", "t", "stty size", "Enter")
	m.waitScreen("30 100")

	// Raw mode: Ctrl-C interrupts the sandbox's program, not airlock.
	// The Ctrl-C waits until the program is the terminal's foreground job:
	// sent while bash is still between reading the line and starting it,
	// the signal reaches bash alone and the program runs on. The inner sh
	// prints before it becomes the sleep, in the same process group.
	m.run("send-keys", "-t", "t", "sh -c 'echo sleep-$((2+3)); exec sleep 300'; echo slept", "Enter")
	m.waitScreen("sleep-5")
	m.run("send-keys", "-t", "t", "C-c")
	m.run("send-keys", "-t", "t", "echo after-$((1+1))", "Enter")
	m.waitScreen("after-2")
	for _, line := range strings.Split(m.screen(), "\n") {
		if strings.TrimSpace(line) == "slept" {
			t.Error("Ctrl-C did not interrupt the sleep")
		}
	}

	// A resize of the window reaches the sandbox.
	m.run("resize-window", "-t", "t", "-x", "120", "-y", "40")
	m.run("send-keys", "-t", "t", "stty size", "Enter")
	m.waitScreen("40 120")

	m.run("send-keys", "-t", "t", "exit 5", "Enter")
	m.waitScreen("airlock-exit=5")
	m.waitScreen("mode:icanon") // cooked again
}
