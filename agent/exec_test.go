package agent_test

import (
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/airlockhq/airlock/agent/protocol"
	"github.com/airlockhq/airlock/internal/testenv/testreq"
)

func TestExecOutput(t *testing.T) {
	h := start(t)
	stdout, stderr, st := h.sh(`echo out; echo err >&2; printf more; printf ' and more' >&2`)
	if st.Code != 0 || st.Signal != 0 || st.TimedOut || st.Error != "" {
		t.Fatalf("status %+v", st)
	}
	if stdout != "out\nmore" {
		t.Errorf("stdout %q", stdout)
	}
	if stderr != "err\n and more" {
		t.Errorf("stderr %q", stderr)
	}
}

func TestExecExitCodes(t *testing.T) {
	h := start(t)
	for _, code := range []int{0, 1, 3, 42, 255} {
		_, _, st := h.sh(fmt.Sprintf("exit %d", code))
		if st.Code != code || st.Signal != 0 || st.Error != "" {
			t.Errorf("exit %d: status %+v", code, st)
		}
	}
}

func TestExecKilledBySignal(t *testing.T) {
	h := start(t)
	for _, sig := range []syscall.Signal{syscall.SIGKILL, syscall.SIGTERM, syscall.SIGSEGV} {
		_, _, st := h.sh(fmt.Sprintf("kill -%d $$", int(sig)))
		if st.Code != 128+int(sig) || st.Signal != int(sig) || st.TimedOut {
			t.Errorf("%v: status %+v, want code %d signal %d", sig, st, 128+int(sig), int(sig))
		}
	}
}

func TestExecTimeout(t *testing.T) {
	h := start(t)
	const timeout = 300 * time.Millisecond
	begin := time.Now()
	r := h.exec(protocol.ExecRequest{Argv: []string{"sleep", "30"}, TimeoutMS: timeout.Milliseconds()})
	st := r.wait(5 * time.Second)
	took := time.Since(begin)
	if !st.TimedOut || st.Signal != int(syscall.SIGKILL) || st.Code != 137 {
		t.Fatalf("status %+v, want timed out by SIGKILL", st)
	}
	if took < timeout || took > timeout+time.Second {
		t.Fatalf("ended after %v, want within 1s of the %v deadline", took, timeout)
	}
	waitGone(t, r.p.PID(), time.Second)
}

func TestExecTimeoutKillsGroup(t *testing.T) {
	h := start(t)
	r := h.exec(protocol.ExecRequest{Argv: []string{"sh", "-c", "sleep 30 & echo $!; wait"}, TimeoutMS: 300})
	st := r.wait(5 * time.Second)
	if !st.TimedOut {
		t.Fatalf("status %+v, want timed out", st)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(r.stdout.String()))
	if err != nil {
		t.Fatalf("stdout %q: %v", r.stdout.String(), err)
	}
	waitGone(t, pid, 2*time.Second)
}

func TestExecFastWithTimeout(t *testing.T) {
	h := start(t)
	r := h.exec(protocol.ExecRequest{Argv: []string{"echo", "quick"}, TimeoutMS: 10_000})
	st := r.wait(5 * time.Second)
	if st.TimedOut || st.Code != 0 || r.stdout.String() != "quick\n" {
		t.Fatalf("status %+v, stdout %q", st, r.stdout.String())
	}
}

// A timeout too large for a time.Duration means "no deadline", not an
// overflow to a negative duration that kills the program at once.
func TestExecHugeTimeout(t *testing.T) {
	h := start(t)
	for _, ms := range []int64{math.MaxInt64, math.MaxInt64 / 1000, 1 << 62} {
		r := h.exec(protocol.ExecRequest{Argv: []string{"sh", "-c", "sleep 0.2; echo ok"}, TimeoutMS: ms})
		st := r.wait(5 * time.Second)
		if st.TimedOut || st.Code != 0 || r.stdout.String() != "ok\n" {
			t.Errorf("timeout %d ms: status %+v, stdout %q", ms, st, r.stdout.String())
		}
	}
}

func TestExecStdin(t *testing.T) {
	h := start(t)
	r := h.exec(protocol.ExecRequest{Argv: []string{"cat"}, Stdin: true})
	input := make([]byte, 3<<20+17) // several frames, and more than a pipe holds
	rand.Read(input)
	go func() {
		r.p.Write([]byte("first line\n"))
		r.p.Write(input)
		r.p.CloseStdin()
	}()
	st := r.wait(10 * time.Second)
	if st.Code != 0 {
		t.Fatalf("status %+v, stderr %q", st, r.stderr.String())
	}
	want := append([]byte("first line\n"), input...)
	if !bytes.Equal(r.stdout.Bytes(), want) {
		t.Fatalf("cat echoed %d bytes, want %d", r.stdout.Len(), len(want))
	}
}

func TestExecNoStdin(t *testing.T) {
	h := start(t)
	// Without Stdin the program reads EOF at once; stray stdin frames are ignored.
	r := h.exec(protocol.ExecRequest{Argv: []string{"cat"}})
	r.p.Write([]byte("ignored"))
	if st := r.wait(5 * time.Second); st.Code != 0 || r.stdout.Len() != 0 {
		t.Fatalf("status %+v, stdout %q", st, r.stdout.String())
	}
}

// Writing to a closed stdin must not crash the agent.
func TestExecWriteAfterCloseStdin(t *testing.T) {
	h := start(t)
	r := h.exec(protocol.ExecRequest{Argv: []string{"sleep", "30"}, Stdin: true})
	if err := r.p.CloseStdin(); err != nil {
		t.Fatal(err)
	}
	r.p.CloseStdin()
	r.p.Write([]byte("too late"))
	h.healthy()
	r.p.Signal(int(syscall.SIGKILL))
	if st := r.wait(5 * time.Second); st.Signal != int(syscall.SIGKILL) {
		t.Fatalf("status %+v", st)
	}
	// And after the program is gone, too.
	r.p.Write([]byte("later still"))
	r.p.CloseStdin()
	h.healthy()
}

// A program that never reads its stdin must not stall the whole agent
// when the host sends it more than a pipe holds.
func TestExecUnreadStdinDoesNotBlockAgent(t *testing.T) {
	h := start(t)
	r := h.exec(protocol.ExecRequest{Argv: []string{"sleep", "30"}, Stdin: true})
	written := make(chan error, 1)
	go func() {
		_, err := r.p.Write(make([]byte, 8<<20))
		written <- err
	}()
	select {
	case <-written:
	case <-time.After(5 * time.Second):
		t.Fatal("writing stdin of a program that does not read it blocked the connection")
	}
	h.healthy()
	if err := r.p.Signal(int(syscall.SIGKILL)); err != nil {
		t.Fatal(err)
	}
	if st := r.wait(5 * time.Second); st.Signal != int(syscall.SIGKILL) {
		t.Fatalf("status %+v", st)
	}
	h.healthy()
}

func TestExecSignal(t *testing.T) {
	h := start(t)
	r := h.exec(protocol.ExecRequest{Argv: []string{"sleep", "30"}})
	comm := fmt.Sprintf("/proc/%d/comm", r.p.PID())
	testreq.Eventually(t, 5*time.Second, "the program to be sleep ("+comm+")", func() bool {
		b, _ := os.ReadFile(comm)
		return strings.TrimSpace(string(b)) == "sleep"
	})
	begin := time.Now()
	if err := r.p.Signal(int(syscall.SIGTERM)); err != nil {
		t.Fatal(err)
	}
	st := r.wait(5 * time.Second)
	if st.Signal != int(syscall.SIGTERM) || st.Code != 128+int(syscall.SIGTERM) || st.TimedOut {
		t.Fatalf("status %+v, want killed by SIGTERM", st)
	}
	if took := time.Since(begin); took > time.Second {
		t.Fatalf("SIGTERM took %v to end sleep", took)
	}
}

func TestExecSignalTrapped(t *testing.T) {
	h := start(t)
	r := h.exec(protocol.ExecRequest{Argv: []string{"sh", "-c", `trap 'echo got-usr1; exit 7' USR1; touch ready; while :; do sleep 0.05; done`}})
	testreq.Eventually(t, 5*time.Second, "the shell to get ready (trap set)", func() bool {
		_, err := os.Stat(filepath.Join(h.ws, "ready"))
		return err == nil
	})
	r.p.Signal(int(syscall.SIGUSR1))
	st := r.wait(5 * time.Second)
	if st.Code != 7 || st.Signal != 0 {
		t.Fatalf("status %+v", st)
	}
	if !strings.Contains(r.stdout.String(), "got-usr1") {
		t.Fatalf("stdout %q", r.stdout.String())
	}
}

func TestExecNotFound(t *testing.T) {
	h := start(t)
	for _, prog := range []string{"/nonexistent/program", "no-such-program-airlock", "./missing"} {
		r := h.exec(protocol.ExecRequest{Argv: []string{prog, "arg"}})
		st := r.wait(5 * time.Second)
		if st.Code != 127 || st.Error == "" || st.Signal != 0 {
			t.Errorf("%s: status %+v, want 127 with an error", prog, st)
		}
	}
	h.healthy()
}

func TestExecNotExecutable(t *testing.T) {
	h := start(t)
	if err := os.WriteFile(filepath.Join(h.ws, "script"), []byte("#!/bin/sh\necho hi\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := h.exec(protocol.ExecRequest{Argv: []string{filepath.Join(h.ws, "script")}})
	st := r.wait(5 * time.Second)
	if st.Code != 126 || st.Error == "" {
		t.Fatalf("status %+v, want 126 with an error", st)
	}
}

func TestExecCwdAndEnv(t *testing.T) {
	h := start(t)
	if err := os.Mkdir(filepath.Join(h.ws, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	r := h.exec(protocol.ExecRequest{Argv: []string{"sh", "-c", `pwd; echo "$FOO|$PATH"`}, Env: []string{"FOO=bar baz"}})
	r.wait(5 * time.Second)
	ws, _ := filepath.EvalSymlinks(h.ws)
	if want := ws + "\nbar baz|" + strings.TrimPrefix(baseEnv[0], "PATH=") + "\n"; r.stdout.String() != want {
		t.Errorf("stdout %q, want %q", r.stdout.String(), want)
	}
	r = h.exec(protocol.ExecRequest{Argv: []string{"pwd"}, Cwd: "sub"})
	r.wait(5 * time.Second)
	if want := filepath.Join(ws, "sub") + "\n"; r.stdout.String() != want {
		t.Errorf("relative cwd: stdout %q, want %q", r.stdout.String(), want)
	}
	r = h.exec(protocol.ExecRequest{Argv: []string{"pwd"}, Cwd: filepath.Join(h.ws, "sub")})
	r.wait(5 * time.Second)
	if want := filepath.Join(ws, "sub") + "\n"; r.stdout.String() != want {
		t.Errorf("absolute cwd: stdout %q, want %q", r.stdout.String(), want)
	}
	r = h.exec(protocol.ExecRequest{Argv: []string{"pwd"}, Cwd: "missing"})
	if st := r.wait(5 * time.Second); st.Code != 127 || st.Error == "" {
		t.Errorf("missing cwd: status %+v, want 127 with an error", st)
	}
}

// A background child that keeps stdout open must not hold Wait.
func TestExecBackgroundChild(t *testing.T) {
	h := start(t)
	begin := time.Now()
	r := h.exec(protocol.ExecRequest{Argv: []string{"sh", "-c", "sleep 30 & echo $!; echo hi"}})
	st := r.wait(5 * time.Second)
	if took := time.Since(begin); took > time.Second {
		t.Errorf("Wait took %v", took)
	}
	if st.Code != 0 {
		t.Errorf("status %+v", st)
	}
	lines := strings.Fields(r.stdout.String())
	if len(lines) != 2 || lines[1] != "hi" {
		t.Fatalf("stdout %q", r.stdout.String())
	}
	pid, _ := strconv.Atoi(lines[0])
	waitGone(t, pid, 2*time.Second)
}

// A child that left the process group (setsid) keeps the pipe open; the
// agent stops reading after its grace period instead of waiting for it.
func TestExecEscapedChild(t *testing.T) {
	if _, err := exec.LookPath("setsid"); err != nil {
		testreq.Skip(t, "skipped: setsid not installed on this host (util-linux)")
	}
	h := start(t)
	begin := time.Now()
	r := h.exec(protocol.ExecRequest{Argv: []string{"sh", "-c", "setsid sleep 30 & echo $!; echo hi"}})
	st := r.wait(5 * time.Second)
	took := time.Since(begin)
	lines := strings.Fields(r.stdout.String())
	if len(lines) >= 1 {
		if pid, err := strconv.Atoi(lines[0]); err == nil && pid > 0 {
			// The agent cannot reach it (another session); we started it, we end it.
			t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL); waitGone(t, pid, 2*time.Second) })
		}
	}
	if took > 1500*time.Millisecond {
		t.Errorf("Wait took %v", took)
	}
	if st.Code != 0 || len(lines) != 2 || lines[1] != "hi" {
		t.Fatalf("status %+v, stdout %q", st, r.stdout.String())
	}
}

func TestExecConcurrent(t *testing.T) {
	h := start(t)
	const n = 20
	runs := make([]*run, n)
	var wg sync.WaitGroup
	var mu sync.Mutex
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			script := fmt.Sprintf(`i=0; while [ $i -lt 300 ]; do echo "out-%d-$i"; echo "err-%d-$i" >&2; i=$((i+1)); done; exit %d`, i, i, i)
			r := h.exec(protocol.ExecRequest{Argv: []string{"sh", "-c", script}})
			mu.Lock()
			runs[i] = r
			mu.Unlock()
		}()
	}
	wg.Wait()
	for i, r := range runs {
		if r == nil {
			t.Fatalf("exec %d did not start", i)
		}
		st := r.wait(20 * time.Second)
		if st.Code != i {
			t.Errorf("exec %d: status %+v", i, st)
		}
		var wantOut, wantErr strings.Builder
		for j := range 300 {
			fmt.Fprintf(&wantOut, "out-%d-%d\n", i, j)
			fmt.Fprintf(&wantErr, "err-%d-%d\n", i, j)
		}
		if r.stdout.String() != wantOut.String() {
			t.Errorf("exec %d: stdout differs (%d bytes, want %d)", i, r.stdout.Len(), wantOut.Len())
		}
		if r.stderr.String() != wantErr.String() {
			t.Errorf("exec %d: stderr differs (%d bytes, want %d)", i, r.stderr.Len(), wantErr.Len())
		}
	}
}

func TestExecLargeOutput(t *testing.T) {
	h := start(t)
	data := make([]byte, 10<<20)
	rand.Read(data)
	if err := os.WriteFile(filepath.Join(h.ws, "big"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	r := h.exec(protocol.ExecRequest{Argv: []string{"sh", "-c", "cat big; cat big >&2"}})
	if st := r.wait(30 * time.Second); st.Code != 0 {
		t.Fatalf("status %+v", st)
	}
	if !bytes.Equal(r.stdout.Bytes(), data) {
		t.Errorf("stdout: %d bytes, differs from the %d written", r.stdout.Len(), len(data))
	}
	if !bytes.Equal(r.stderr.Bytes(), data) {
		t.Errorf("stderr: %d bytes, differs from the %d written", r.stderr.Len(), len(data))
	}
}

func TestExecPIDAndHealth(t *testing.T) {
	h := start(t)
	if hl := h.healthy(); hl.Processes != 0 || hl.UptimeMS < 0 {
		t.Fatalf("health %+v", hl)
	}
	r := h.exec(protocol.ExecRequest{Argv: []string{"sleep", "30"}})
	if r.p.PID() <= 0 {
		t.Fatalf("PID %d", r.p.PID())
	}
	if _, ppid, ok := procStat(r.p.PID()); !ok || ppid != os.Getpid() {
		t.Fatalf("PID %d is not the agent's child", r.p.PID())
	}
	if hl := h.healthy(); hl.Processes != 1 {
		t.Fatalf("health %+v, want 1 process", hl)
	}
	r.p.Signal(int(syscall.SIGKILL))
	r.wait(5 * time.Second)
	if hl := h.healthy(); hl.Processes != 0 {
		t.Fatalf("health %+v, want no processes", hl)
	}
}

// Files handed in with an exec are written before the program starts, as
// a put writes them: never through a symlink.
func TestExecInlineFiles(t *testing.T) {
	h := start(t)
	r := h.exec(protocol.ExecRequest{
		Argv:  []string{"/bin/sh", "-c", "cat code.sh; stat -c %a code.sh; sh code.sh"},
		Files: []protocol.InlineFile{{Path: "code.sh", Mode: 0o600, Data: []byte("echo from the file\n")}},
	})
	if st := r.wait(10 * time.Second); st.Code != 0 || r.stdout.String() != "echo from the file\n600\nfrom the file\n" {
		t.Fatalf("exit %+v stdout %q stderr %q", st, r.stdout.String(), r.stderr.String())
	}
	target := filepath.Join(t.TempDir(), "host-file")
	if err := os.WriteFile(target, []byte("host"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, filepath.Join(h.ws, "link.sh")); err != nil {
		t.Fatal(err)
	}
	_, err := h.c.Exec(h.ctx(5*time.Second), protocol.ExecRequest{
		Argv: []string{"true"}, Files: []protocol.InlineFile{{Path: "link.sh", Data: []byte("x")}},
	}, nil, nil)
	var re *protocol.RemoteError
	if !errors.As(err, &re) || re.Code != "refused" {
		t.Fatalf("a hand-in through a symlink: %v", err)
	}
	if b, _ := os.ReadFile(target); string(b) != "host" {
		t.Fatalf("the host file was written through the link: %q", b)
	}
}
