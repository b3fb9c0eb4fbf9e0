package e2e_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/netns"
	"github.com/airlockhq/airlock/internal/testenv"
)

// TestSecondAirlockdRefused starts airlockd on a state directory, gives
// it a live session with a network, then starts a second airlockd on the
// same directory: the second must exit promptly, non-zero, with an error
// naming the directory and the first one's PID, before it reconciles
// anything; the first must still serve, with its sandbox, mounts,
// cgroups and network untouched.
func TestSecondAirlockdRefused(t *testing.T) {
	n := newTestNode(t, nodeOptions{name: "statelock"})
	tmp, parent, bin, runsc := n.dir, n.parent, n.bin, n.runsc
	prefix := "sl" + testenv.RandomID()[:4]
	args := n.args("--egress-prefix", prefix, "--pool-max", "0", "--warm", "", "--warm-sessions", "", "--no-snapshots")

	d1 := n.track(startDaemon(t, bin, args))
	keyBytes, err := os.ReadFile(filepath.Join(tmp, "default.key"))
	if err != nil {
		t.Fatal(err)
	}
	c := newClient(t, d1.url, strings.TrimSpace(string(keyBytes)))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	sess, _, err := c.CreateSession(ctx, airlock.CreateSessionRequest{Image: "base",
		Network: &airlock.NetworkPolicy{Mode: airlock.NetworkAllowList, Allow: []string{"example.test"}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Exec(ctx, sess.ID, airlock.SessionExecRequest{Shell: "echo kept > f.txt"}); err != nil {
		t.Fatal(err)
	}
	before := observe(t, runsc, tmp, parent, d1.pid())
	netsBefore := ourNetworks(t, prefix)
	if len(before.containers) == 0 || len(before.mounts) == 0 || len(netsBefore) == 0 {
		t.Fatalf("the first airlockd's session has no sandbox or network to watch: %s; networks %v", before, netsBefore)
	}

	// The second airlockd, on the same state directory.
	start := time.Now()
	d2 := spawnDaemon(t, bin, args)
	n.track(d2)
	waitFor(t, 30*time.Second, "the second airlockd to exit", func() bool {
		if strings.Contains(d2.logs(), "airlockd serving") {
			t.Fatalf("the second airlockd serves on the first one's state directory\n%s", d2.logs())
		}
		return !d2.running()
	})
	took := time.Since(start)
	if d2.err == nil {
		t.Fatalf("the second airlockd exited with status 0\n%s", d2.logs())
	}
	log := d2.logs()
	for _, want := range []string{"state directory " + tmp + " is in use", fmt.Sprintf("pid %d", d1.pid())} {
		if !strings.Contains(log, want) {
			t.Errorf("the second airlockd's error does not say %q:\n%s", want, log)
		}
	}
	if strings.Contains(log, "serving") || strings.Contains(strings.ToLower(log), "reconcil") {
		t.Errorf("the second airlockd went on to reconcile or serve:\n%s", log)
	}
	if took > 15*time.Second {
		t.Errorf("the second airlockd took %v to give up", took)
	}
	t.Logf("second airlockd refused after %v: %s", took.Round(time.Millisecond), strings.TrimSpace(log))
	if b, err := os.ReadFile(filepath.Join(tmp, "airlockd.lock")); err != nil || strings.TrimSpace(string(b)) != strconv.Itoa(d1.pid()) {
		t.Errorf("lock file holds %q (%v), want the first airlockd's pid %d", b, err, d1.pid())
	}

	// Nothing of the first one's was touched, and it still serves.
	after := observe(t, runsc, tmp, parent, d1.pid())
	for what, pair := range map[string][2][]string{
		"runsc containers": {before.containers, after.containers},
		"mounts":           {before.mounts, after.mounts},
		"cgroups":          {before.cgroups, after.cgroups},
		"run directories":  {before.dirs, after.dirs},
		"networks":         {netsBefore, ourNetworks(t, prefix)},
	} {
		if !slices.Equal(pair[0], pair[1]) {
			t.Errorf("%s of the first airlockd changed: %v, then %v", what, pair[0], pair[1])
		}
	}
	for i, pid := range before.pids {
		// runsc commands come and go (a pool member being made); the
		// sandboxes and their gofers must stay.
		if !strings.Contains(before.cmdlines[i], ": runsc-sandbox ") && !strings.Contains(before.cmdlines[i], ": runsc-gofer ") {
			continue
		}
		if !cmdlineMentions(pid, tmp) {
			t.Errorf("process %s of the first airlockd's sandbox is gone", before.cmdlines[i])
		}
	}
	resp, err := http.Get(d1.url + "/readyz")
	if err != nil {
		t.Fatalf("the first airlockd stopped serving: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("the first airlockd's /readyz: %d", resp.StatusCode)
	}
	e, err := c.Exec(ctx, sess.ID, airlock.SessionExecRequest{Shell: "cat f.txt"})
	if err != nil || e.Stdout != "kept\n" {
		t.Fatalf("exec in the first airlockd's session after the second start: %+v, %v", e, err)
	}
	d1.stop(t)
}

// spawnDaemon starts airlockd and collects its log, without waiting for
// it to serve.
func spawnDaemon(t *testing.T, bin string, args []string) *daemon {
	t.Helper()
	d := &daemon{cmd: exec.Command(bin, args...), exited: make(chan struct{})}
	stderr, err := d.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			d.mu.Lock()
			d.log.WriteString(sc.Text() + "\n")
			d.mu.Unlock()
		}
		d.err = d.cmd.Wait()
		close(d.exited)
	}()
	return d
}

// ourNetworks lists the sandbox network namespaces and host links named
// with prefix.
func ourNetworks(t *testing.T, prefix string) []string {
	t.Helper()
	var out []string
	entries, err := os.ReadDir(netns.DefaultDir)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), prefix) {
			out = append(out, "netns "+e.Name())
		}
	}
	ifs, err := net.Interfaces()
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range ifs {
		if strings.HasPrefix(i.Name, prefix) {
			out = append(out, "link "+i.Name)
		}
	}
	slices.Sort(out)
	return out
}
