package session_test

import (
	"bufio"
	"bytes"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/internal/testenv/testreq"
)

// lockedBuffer is a buffer safe to write from a stream and read meanwhile.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
	at time.Time // when the first byte came
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.b.Len() == 0 {
		l.at = time.Now()
	}
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func TestExecBasics(t *testing.T) {
	s := newStack(t, nil)
	sess := s.create(s.a, airlock.CreateSessionRequest{Image: "base"})
	ctx := ctxFor(t, 2*time.Minute)
	c := s.a.c

	e, err := c.Exec(ctx, sess.ID, airlock.SessionExecRequest{Cmd: []string{"cat"}, Stdin: "from stdin"})
	if err != nil || e.Stdout != "from stdin" || e.Language != airlock.Command {
		t.Fatalf("stdin: %+v %v", e, err)
	}
	s.shell(s.a, sess.ID, "mkdir -p sub")
	e, err = c.Exec(ctx, sess.ID, airlock.SessionExecRequest{Shell: "echo $FOO; pwd; exit 3", Env: map[string]string{"FOO": "bar"}, Cwd: "sub"})
	if err != nil || e.Stdout != "bar\n/workspace/sub\n" || e.ExitCode != 3 {
		t.Fatalf("env, cwd, exit code: %+v %v", e, err)
	}
	e, err = c.Exec(ctx, sess.ID, airlock.SessionExecRequest{Cmd: []string{"no-such-program"}})
	if err != nil || e.ExitCode != 127 {
		t.Fatalf("missing program: %+v %v", e, err)
	}
	// State persists between execs: files, and the working tree.
	s.shell(s.a, sess.ID, "echo kept > state.txt")
	if e := s.shell(s.a, sess.ID, "cat state.txt"); e.Stdout != "kept\n" {
		t.Fatalf("state: %+v", e)
	}
	start := time.Now()
	e, err = c.Exec(ctx, sess.ID, airlock.SessionExecRequest{Shell: "echo before; sleep 30", TimeoutSec: 1})
	if err != nil || !e.TimedOut || e.ExitCode != 137 || e.Stdout != "before\n" {
		t.Fatalf("timeout: %+v %v", e, err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("a 1 s timeout took %v", d)
	}
	// Output past the cap is cut and flagged.
	e, err = c.Exec(ctx, sess.ID, airlock.SessionExecRequest{Shell: "head -c 3000000 /dev/zero | tr '\\0' x"})
	if err != nil || len(e.Stdout) != 1<<20 || !e.StdoutTruncated {
		t.Fatalf("output cap: %d bytes, truncated %v, %v", len(e.Stdout), e.StdoutTruncated, err)
	}
	if e := s.shell(s.a, sess.ID, "echo alive"); e.Stdout != "alive\n" {
		t.Fatalf("after all that: %+v", e)
	}
}

// The first line of a slow program arrives on the stream before the
// program ends, and the events come in order: start, output, exit.
func TestExecStreamsAsItHappens(t *testing.T) {
	s := newStack(t, nil)
	sess := s.create(s.a, airlock.CreateSessionRequest{Image: "base"})
	var out, errOut lockedBuffer
	var startedAt time.Time
	var execID string
	start := time.Now()
	e, err := s.a.c.ExecStreaming(ctxFor(t, time.Minute), sess.ID,
		airlock.SessionExecRequest{Shell: "echo first; echo oops >&2; sleep 3; echo second"},
		client.ExecStream{
			Started: func(id string, pid int) {
				startedAt, execID = time.Now(), id
				if pid <= 0 {
					t.Errorf("start event pid %d", pid)
				}
			},
			Stdout: &out, Stderr: &errOut,
		})
	end := time.Now()
	if err != nil {
		t.Fatal(err)
	}
	if e.ExitCode != 0 || out.String() != "first\nsecond\n" || errOut.String() != "oops\n" || e.Stdout != "first\nsecond\n" || e.ID != execID {
		t.Fatalf("result %+v, streamed %q %q", e, out.String(), errOut.String())
	}
	if startedAt.IsZero() || out.at.Before(startedAt) {
		t.Errorf("output before the start event")
	}
	if got := out.at.Sub(start); got > 2*time.Second || end.Sub(out.at) < 2*time.Second {
		t.Fatalf("first line at %v, program ended %v later: not streamed", got, end.Sub(out.at))
	}
	t.Logf("first line after %v, end after %v", out.at.Sub(start), end.Sub(start))

	// The raw stream: event names in order, one JSON data line each.
	req, _ := http.NewRequest("POST", s.URL+"/v1/sessions/"+sess.ID+"/exec", strings.NewReader(`{"cmd": ["printf", "\\xff\\xfe"]}`))
	req.Header.Set("Authorization", "Bearer "+s.a.key)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("content type %q", resp.Header.Get("Content-Type"))
	}
	var events []string
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 4<<20)
	for sc.Scan() {
		line := sc.Text()
		if name, ok := strings.CutPrefix(line, "event: "); ok {
			events = append(events, name)
		}
		if strings.HasPrefix(line, "data: ") && strings.Contains(line, "data_b64") && !strings.Contains(line, `"//4="`) {
			t.Errorf("binary output: %s", line)
		}
	}
	if strings.Join(events, ",") != "start,stdout,exit" {
		t.Fatalf("events %v", events)
	}
}

// Several execs run at once in one session; the session is busy while
// they run and lists them, and ready after.
func TestConcurrentExecs(t *testing.T) {
	s := newStack(t, nil)
	sess := s.create(s.a, airlock.CreateSessionRequest{Image: "base"})
	ctx := ctxFor(t, time.Minute)
	const n = 4
	var wg sync.WaitGroup
	results := make([]*airlock.Execution, n)
	errs := make([]error, n)
	start := time.Now()
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			results[i], errs[i] = s.a.c.Exec(ctx, sess.ID, airlock.SessionExecRequest{Shell: fmt.Sprintf("sleep 2; echo %d", i)})
		}(i)
	}
	// While they run: busy, with n programs listed.
	var seen *airlock.Session
	testreq.Poll(1500*time.Millisecond, func() bool {
		got, err := s.a.c.Session(ctx, sess.ID)
		if err == nil && len(got.Running) == n {
			seen = got
			return true
		}
		return false
	})
	wg.Wait()
	elapsed := time.Since(start)
	for i := 0; i < n; i++ {
		if errs[i] != nil || results[i].Stdout != fmt.Sprintf("%d\n", i) {
			t.Fatalf("exec %d: %+v %v", i, results[i], errs[i])
		}
	}
	if seen == nil || seen.State != airlock.SessionBusy {
		t.Errorf("while running: %+v", seen)
	}
	if elapsed > 2*time.Second*n/2 {
		t.Errorf("%d execs of 2 s took %v: not concurrent", n, elapsed)
	}
	got, err := s.a.c.Session(ctx, sess.ID)
	if err != nil || got.State != airlock.SessionReady || len(got.Running) != 0 || got.Usage.Execs != n {
		t.Fatalf("after: %+v %v", got, err)
	}
}

// A signal reaches a running exec's process group.
func TestSignalExec(t *testing.T) {
	s := newStack(t, nil)
	sess := s.create(s.a, airlock.CreateSessionRequest{Image: "base"})
	ctx := ctxFor(t, time.Minute)
	var out lockedBuffer
	pids := make(chan int, 1)
	done := make(chan struct{})
	var e *airlock.Execution
	var err error
	go func() {
		defer close(done)
		e, err = s.a.c.ExecStreaming(ctx, sess.ID, airlock.SessionExecRequest{
			Shell: "trap 'echo got TERM; exit 3' TERM; echo ready; while true; do sleep 0.1; done",
		}, client.ExecStream{Started: func(_ string, pid int) { pids <- pid }, Stdout: &out})
	}()
	pid := <-pids
	waitFor(t, 30*time.Second, "the program to print ready", func() bool { return strings.Contains(out.String(), "ready") })
	if err := s.a.c.SignalExec(ctx, sess.ID, pid, "SIGTERM"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the signalled program did not end")
	}
	if err != nil || e.ExitCode != 3 || !strings.Contains(e.Stdout, "got TERM") {
		t.Fatalf("after TERM: %+v %v", e, err)
	}
	// KILL by number, to a program that ignores TERM.
	go func() {
		e, err = s.a.c.ExecStreaming(ctx, sess.ID, airlock.SessionExecRequest{Shell: "trap '' TERM; sleep 60"},
			client.ExecStream{Started: func(_ string, pid int) { pids <- pid }})
		pids <- -1
	}()
	pid = <-pids
	if err := s.a.c.SignalExec(ctx, sess.ID, pid, "9"); err != nil {
		t.Fatal(err)
	}
	if <-pids; err != nil || e.ExitCode != 137 {
		t.Fatalf("after KILL: %+v %v", e, err)
	}
	// The program is gone: its PID is no longer a running exec.
	err = s.a.c.SignalExec(ctx, sess.ID, pid, "TERM")
	wantProblem(t, "signal a finished exec", err, 404, "process-not-found")
}

// One command that allocates far more than the session's memory fails
// alone (MemoryError), the sandbox is not killed, and the session works
// on. The same in a code context, which lives on too.
func TestSessionMemoryLimit(t *testing.T) {
	s := newStack(t, nil)
	sess := s.create(s.a, airlock.CreateSessionRequest{})
	ctx := ctxFor(t, 2*time.Minute)
	s.shell(s.a, sess.ID, "echo kept > before.txt")
	e := s.shell(s.a, sess.ID, `python3 -c "b = bytearray(2 << 30)"`)
	if e.ExitCode != 1 || !strings.Contains(e.Stderr, "MemoryError") || e.OOMKilled {
		t.Fatalf("2 GiB allocation: %+v", e)
	}
	// A slow climb hits the limit too.
	e = s.shell(s.a, sess.ID, `python3 -c "
chunks = []
while True:
    chunks.append(bytearray(16 << 20))
"`)
	if e.ExitCode != 1 || !strings.Contains(e.Stderr, "MemoryError") || e.OOMKilled {
		t.Fatalf("slow climb: %+v", e)
	}
	if e := s.shell(s.a, sess.ID, "cat before.txt"); e.Stdout != "kept\n" {
		t.Fatalf("session after the memory bombs: %+v", e)
	}
	cc, err := s.a.c.CreateContext(ctx, sess.ID, airlock.ContextPython)
	if err != nil {
		t.Fatal(err)
	}
	if r, err := s.a.c.RunCell(ctx, sess.ID, cc.ID, airlock.RunCellRequest{Code: "x = 41"}); err != nil || r.Error != nil {
		t.Fatalf("cell: %+v %v", r, err)
	}
	r, err := s.a.c.RunCell(ctx, sess.ID, cc.ID, airlock.RunCellRequest{Code: "big = bytearray(2 << 30)"})
	if err != nil || r.Error == nil || r.Error.Name != "MemoryError" || r.ContextState != airlock.ContextIdle {
		t.Fatalf("memory bomb cell: %+v %v", r, err)
	}
	if r, err := s.a.c.RunCell(ctx, sess.ID, cc.ID, airlock.RunCellRequest{Code: "x + 1"}); err != nil || r.Value != "42" {
		t.Fatalf("context after the bomb: %+v %v", r, err)
	}
	got, err := s.a.c.Session(ctx, sess.ID)
	if err != nil || got.State != airlock.SessionReady {
		t.Fatalf("session: %+v %v", got, err)
	}
}
