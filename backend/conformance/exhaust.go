package conformance

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock/agent/protocol"
	"github.com/airlockhq/airlock/internal/testenv/testreq"
)

var exhaustionCases = []Case{
	{Group: Exhaustion, Name: "fork-bomb",
		Want: "a bash fork bomb under a 64-process limit ends at its 5 s deadline, the sandbox's host tasks stay bounded (at most 4 per allowed process, plus 256), and a new sandbox still starts and runs",
		Run: func(t *testing.T, e *Env) {
			l := e.Limits()
			l.Pids = 64
			sb := e.Sandbox(&l)
			base := hostTasks()
			peak, peakSandbox := base, int64(0)
			stop := make(chan struct{})
			done := make(chan struct{})
			go func() {
				defer close(done)
				for {
					if n := hostTasks(); n > peak {
						peak = n
					}
					if st, err := sb.Stats(context.Background()); err == nil && st.Pids > peakSandbox {
						peakSandbox = st.Pids
					}
					select {
					case <-stop:
						return
					case <-time.After(20 * time.Millisecond):
					}
				}
			}()
			r := e.Exec(sb, protocol.ExecRequest{Argv: []string{"bash", "-c", `b() { b | b & }; b; sleep 60`}, TimeoutMS: 5000})
			close(stop)
			<-done
			if r.Elapsed > 20*time.Second {
				t.Errorf("the fork bomb ran for %v past its 5 s deadline", r.Elapsed)
			}
			// The sandbox's host tasks (its own processes on a shared
			// kernel; the kernel's and its stubs' otherwise) stay
			// bounded by the limit.
			if peakSandbox > 64*4+256 {
				t.Errorf("the sandbox had %d host tasks under a 64-process limit", peakSandbox)
			}
			t.Logf("host tasks: %d before, %d at the peak (the sandbox's: %d); bomb: %s", base, peak, peakSandbox, r)
			e.Alive(e.Sandbox(nil))
		}},
	{Group: Exhaustion, Name: "fork-limit",
		Want: "fork past a 32-process limit fails with EAGAIN before 200 forks",
		Run: func(t *testing.T, e *Env) {
			l := e.Limits()
			l.Pids = 32
			sb := e.Sandbox(&l)
			r := e.Py(sb, `
import time
n, err = 0, "none"
try:
    for i in range(200):
        if os.fork() == 0:
            time.sleep(5)
            os._exit(0)
        n += 1
except OSError as ex:
    err = errname(ex)
report("forked", n)
report("error", err)
`)
			got := probes(r.Stdout)
			if got["error"] != "EAGAIN" {
				t.Fatalf("fork past the limit: %s, want EAGAIN: %s", got["error"], r)
			}
			if n, _ := strconv.Atoi(got["forked"]); n >= 200 {
				t.Fatalf("%d forks succeeded under a limit of 32", n)
			}
		}},
	{Group: Exhaustion, Name: "memory-bomb",
		Want: "touching 1 GiB under a 256 MiB limit gets the program (or the whole sandbox) killed by the OOM killer, reported as SIGKILL/137 or a sandbox that ended, with Stats.OOMKilled set",
		Run: func(t *testing.T, e *Env) {
			l := e.Limits()
			l.MemoryBytes = 256 << 20
			sb := e.Sandbox(&l)
			r := e.Exec(sb, protocol.ExecRequest{Argv: []string{"python3", "-c",
				"x = bytearray(1 << 30)\nfor i in range(0, len(x), 4096): x[i] = 1\nprint('survived')"}, TimeoutMS: 60000})
			if strings.Contains(r.Stdout, "survived") || (r.Err == nil && r.Status.Code == 0) {
				t.Fatalf("1 GiB was touched under a 256 MiB limit: %s", r)
			}
			if r.Err == nil && r.Status.Code != 137 && r.Status.Signal != 9 {
				t.Errorf("the program ended with %s, want SIGKILL (137) or the sandbox gone", r)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if st, err := sb.Stats(ctx); err == nil && !st.OOMKilled {
				t.Errorf("Stats does not report the OOM kill: %+v", st)
			}
		}},
	{Group: Exhaustion, Name: "disk-fill",
		Want: "writing 64 MB into a 32 MB workspace fails with ENOSPC, and the workspace's file system is no larger than its cap",
		Run: func(t *testing.T, e *Env) {
			l := e.Limits()
			l.DiskBytes = 32 << 20
			sb := e.Sandbox(&l)
			r := e.Sh(sb, `dd if=/dev/zero of=/workspace/big bs=1M count=64 2>&1; dd if=/dev/zero of=/tmp/big bs=1M count=64 2>&1; df -B1 --output=size /workspace | tail -1`)
			if !strings.Contains(r.Stdout, "No space left") {
				t.Fatalf("writing past the disk cap did not fail with ENOSPC: %s", r)
			}
			lines := strings.Fields(r.Stdout)
			if size, err := strconv.ParseInt(lines[len(lines)-1], 10, 64); err != nil || size > 40<<20 {
				t.Errorf("the workspace file system is %s bytes, want at most the 32 MB cap: %s", lines[len(lines)-1], r)
			}
		}},
	{Group: Exhaustion, Name: "inode-fill",
		Want: "creating empty files in a 16 MB workspace fails with ENOSPC before 5000 files (the inode cap holds)",
		Run: func(t *testing.T, e *Env) {
			l := e.Limits()
			l.DiskBytes = 16 << 20
			sb := e.Sandbox(&l)
			r := e.Py(sb, `
os.mkdir("/workspace/i")
n, err = 0, "none"
try:
    for i in range(20000):
        os.close(os.open("/workspace/i/%d" % i, os.O_CREAT | os.O_WRONLY, 0o644))
        n += 1
except OSError as ex:
    err = errname(ex)
report("files", n)
report("error", err)
`)
			got := probes(r.Stdout)
			n, _ := strconv.Atoi(got["files"])
			if got["error"] != "ENOSPC" || n >= 5000 {
				t.Fatalf("made %d files, stopped by %s; want ENOSPC before 5000: %s", n, got["error"], r)
			}
		}},
	{Group: Exhaustion, Name: "fd-storm",
		Want: "opening descriptors stops with EMFILE at the 4096 limit, and raising the hard limit fails",
		Run: func(t *testing.T, e *Env) {
			sb := e.Sandbox(nil)
			r := e.Py(sb, `
import resource
fds, err = [], "none"
try:
    for i in range(1 << 20):
        fds.append(os.open("/dev/null", os.O_RDONLY))
except OSError as ex:
    err = errname(ex)
report("open", len(fds))
report("error", err)
try:
    resource.setrlimit(resource.RLIMIT_NOFILE, (1 << 20, 1 << 20))
    report("raise", "ok")
except (OSError, ValueError) as ex:
    report("raise", "EPERM")
`)
			got := probes(r.Stdout)
			n, _ := strconv.Atoi(got["open"])
			if got["error"] != "EMFILE" || n > 4096 {
				t.Fatalf("opened %d descriptors, stopped by %s; want EMFILE within 4096: %s", n, got["error"], r)
			}
			if got["raise"] != "EPERM" {
				t.Errorf("raising RLIMIT_NOFILE: %s, want a failure", got["raise"])
			}
		}},
	{Group: Exhaustion, Name: "huge-argv-and-env",
		Want: "an exec request over the protocol's argument cap is refused before it is sent; inside, execve with 8 MiB of arguments or environment fails (E2BIG); 200 KiB of arguments pass intact; the agent survives",
		Run: func(t *testing.T, e *Env) {
			sb := e.Sandbox(nil)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if _, err := sb.Agent().Exec(ctx, protocol.ExecRequest{Argv: []string{"true", strings.Repeat("x", protocol.MaxArgBytes)}}, nil, nil); err == nil {
				t.Errorf("an exec request of %d argument bytes was sent", protocol.MaxArgBytes+4)
			}
			// Linux caps one argument at 128 KiB: four of 50 KiB.
			big := strings.Repeat("y", 50<<10)
			r := e.Exec(sb, protocol.ExecRequest{Argv: []string{"bash", "-c", `printf %s "$@" | wc -c`, "x", big, big, big, big}})
			if strings.TrimSpace(r.Stdout) != strconv.Itoa(4*len(big)) {
				t.Errorf("a 200 KiB argument did not arrive whole: %s", r)
			}
			r = e.Py(sb, `
import subprocess
for label, kw in (("argv", {"args": ["/bin/true", "a" * (8 << 20)]}), ("env", {"args": ["/bin/true"], "env": {"BIG": "b" * (8 << 20)}})):
    try:
        subprocess.run(**kw)
        report(label, "ok")
    except OSError as ex:
        report(label, errname(ex))
`)
			requireRan(t, r)
			// gVisor's kernel says ENAMETOOLONG for one argument too long.
			e.expectProbes(r, []string{"E2BIG", "ENAMETOOLONG"}, "argv", "env")
			e.Alive(sb)
		}},
	{Group: Exhaustion, Name: "endless-output",
		Want: "a program writing without end on stdout and stderr is ended at its 2 s deadline (stretched by the backend's Slowdown); the host reads it as it streams and keeps only its cap; the agent survives",
		Run: func(t *testing.T, e *Env) {
			sb := e.Sandbox(nil)
			deadline := e.Scaled(2 * time.Second)
			r := e.Exec(sb, protocol.ExecRequest{Argv: []string{"bash", "-c", "yes out & yes err >&2 & wait"}, TimeoutMS: deadline.Milliseconds()})
			if r.Err != nil || !r.Status.TimedOut {
				t.Errorf("endless output did not end at its deadline: %s", r)
			}
			if r.Elapsed > deadline+13*time.Second {
				t.Errorf("it took %v to end a %v program", r.Elapsed, deadline)
			}
			if r.OutBytes < keepBytes || r.ErrBytes < keepBytes {
				t.Errorf("streamed %d and %d bytes, want more than %d on each stream", r.OutBytes, r.ErrBytes, keepBytes)
			}
			if len(r.Stdout) > keepBytes || len(r.Stderr) > keepBytes {
				t.Errorf("kept more than the cap")
			}
			e.Alive(sb)
		}},
	{Group: Exhaustion, Name: "sleep-past-deadline",
		Want: "a program that sleeps past its 1 s deadline is killed: timed out, exit 137, well within 10 s",
		Run: func(t *testing.T, e *Env) {
			sb := e.Sandbox(nil)
			r := e.Exec(sb, protocol.ExecRequest{Argv: []string{"sleep", "600"}, TimeoutMS: 1000})
			if r.Err != nil || !r.Status.TimedOut || r.Status.Code != 137 || r.Elapsed > 10*time.Second {
				t.Fatalf("want timed out with 137 within 10 s: %s", r)
			}
		}},
	{Group: Exhaustion, Name: "ignores-sigterm",
		Want: "a program ignoring SIGTERM, SIGINT and SIGHUP survives those signals but is killed at its deadline, and nothing of it is left running in the sandbox",
		Run: func(t *testing.T, e *Env) {
			sb := e.Sandbox(nil)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			var out syncBuffer
			p, err := sb.Agent().Exec(ctx, protocol.ExecRequest{Argv: []string{"bash", "-c",
				`trap '' TERM INT HUP; python3 -c 'import signal, time
for s in (1, 2, 15): signal.signal(s, signal.SIG_IGN)
print("ignoring", flush=True)
time.sleep(600)' & wait`}, TimeoutMS: 4000}, &out, nil)
			if err != nil {
				t.Fatal(err)
			}
			if !testreq.Poll(3*time.Second, func() bool { return strings.Contains(out.String(), "ignoring") }) {
				t.Fatalf("the program did not start ignoring the signals within 3 s of its 4 s: %q", out.String())
			}
			for _, s := range []int{15, 2, 1} {
				p.Signal(s)
			}
			select {
			case <-p.Done():
				t.Fatalf("the program ended on a signal it ignores")
			case <-time.After(700 * time.Millisecond):
			}
			st, err := p.Wait(ctx)
			if err != nil || !st.TimedOut || st.Code != 137 {
				t.Fatalf("want killed at the deadline (timed out, 137): %+v %v", st, err)
			}
			r := e.Sh(sb, "ls -d /proc/[0-9]* | wc -l")
			if n, _ := strconv.Atoi(strings.TrimSpace(r.Stdout)); n > 4 {
				t.Errorf("%d processes in the sandbox after the kill, want the agent, bash, ls and wc at most: %s", n, r)
			}
		}},
	{Group: Exhaustion, Name: "daemon-outlives-parent",
		Want: "a child that double-forks into its own session lets its exec return at once; it stays confined to the sandbox, and Stop ends it: its output file stops changing",
		Run: func(t *testing.T, e *Env) {
			sb := e.Sandbox(nil)
			r := e.Exec(sb, protocol.ExecRequest{Argv: []string{"bash", "-c",
				`setsid bash -c 'while :; do date +%s%N >> /workspace/daemon.log; sleep 0.02; done' </dev/null >/dev/null 2>&1 & sleep 0.3; exit 0`}, TimeoutMS: 10000})
			if r.Err != nil || r.Status.Code != 0 || r.Elapsed > 5*time.Second {
				t.Fatalf("the parent did not return promptly: %s", r)
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			// That it runs is seen from inside (the host of a microVM
			// has no live view of its workspace); that Stop ends it, from
			// the host.
			first := int64(-1)
			if !testreq.Poll(10*time.Second, func() bool {
				fi, err := sb.Agent().Stat(ctx, "/workspace/daemon.log")
				if err != nil {
					return false
				}
				if first < 0 {
					first = fi.Size
				}
				return fi.Size > first
			}) {
				t.Fatalf("the daemon does not write to its log after its parent returned (%d bytes)", first)
			}
			if err := sb.Stop(ctx); err != nil {
				t.Fatalf("stop: %v", err)
			}
			log := sb.WorkspaceDir() + "/daemon.log"
			a, errA := os.Stat(log)
			// What is checked: nothing changes over 300 ms (the daemon
			// wrote every 20 ms).
			time.Sleep(300 * time.Millisecond)
			b, errB := os.Stat(log)
			if errA != nil || errB != nil {
				t.Fatalf("the daemon's file is not in the workspace: %v %v", errA, errB)
			}
			if a.Size() != b.Size() || !a.ModTime().Equal(b.ModTime()) {
				t.Fatalf("the daemon still writes after Stop: %d -> %d bytes", a.Size(), b.Size())
			}
		}},
}

// hostTasks is the number of tasks on the host (from /proc/loadavg).
func hostTasks() int {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) < 4 {
		return 0
	}
	_, total, ok := strings.Cut(f[3], "/")
	if !ok {
		return 0
	}
	n, _ := strconv.Atoi(total)
	return n
}
