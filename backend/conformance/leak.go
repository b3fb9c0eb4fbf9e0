package conformance

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock/agent/protocol"
	"github.com/airlockhq/airlock/internal/testenv/testreq"
)

var leakCases = []Case{
	{Group: Leak, Name: "processes",
		Want: "of two sandboxes running at once, neither sees the other's processes, and killing everything it can reach leaves the other's program running",
		Run: func(t *testing.T, e *Env) {
			a, b := e.Sandbox(nil), e.Sandbox(nil)
			marker := "leakmark" + randomHex(6)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			p, err := a.Agent().Exec(ctx, protocol.ExecRequest{Argv: []string{"bash", "-c", "exec -a " + marker + " sleep 600"}}, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer p.Signal(9)
			var r Result
			if !testreq.Poll(10*time.Second, func() bool {
				r = e.Sh(a, "cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' ' '")
				return strings.Contains(r.Stdout, marker)
			}) {
				t.Fatalf("the marker process does not run in the first sandbox after 10 s: %s", r)
			}
			r = e.Sh(b, "cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' ' '; echo; for p in /proc/[0-9]*; do kill -9 ${p#/proc/} 2>/dev/null; done; kill -9 -1")
			if strings.Contains(r.Stdout, marker) {
				t.Fatalf("the second sandbox sees the first one's process: %s", r)
			}
			select {
			case <-p.Done():
				t.Fatalf("the first sandbox's program died when the second killed everything it could")
			case <-time.After(200 * time.Millisecond):
			}
			e.Alive(a)
		}},
	{Group: Leak, Name: "files",
		Want: "a file one sandbox writes in /workspace, /tmp or /dev/shm is absent from another sandbox running at once",
		Run: func(t *testing.T, e *Env) {
			a, b := e.Sandbox(nil), e.Sandbox(nil)
			token := "leakfile" + randomHex(6)
			if r := e.Sh(a, fmt.Sprintf("for d in /workspace /tmp /dev/shm; do echo %s > $d/%s || exit 1; done", token, token)); r.Status.Code != 0 {
				t.Fatalf("write: %s", r)
			}
			r := e.Sh(b, fmt.Sprintf("ls -a /workspace /tmp /dev/shm; grep -rs %s /workspace /tmp /dev/shm; find / -xdev -name '%s*' 2>/dev/null; true", token, token))
			if strings.Contains(r.Stdout, token) {
				t.Fatalf("the second sandbox sees the first one's files: %s", r)
			}
		}},
	{Group: Leak, Name: "network",
		Want: "a TCP, UDP or abstract unix socket one sandbox listens on cannot be reached from another: connections are refused",
		Run: func(t *testing.T, e *Env) {
			a, b := e.Sandbox(nil), e.Sandbox(nil)
			name := "airlock-" + randomHex(6)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			var ready syncBuffer
			p, err := a.Agent().Exec(ctx, protocol.ExecRequest{Argv: []string{"python3", "-c", fmt.Sprintf(`
import socket, time
t = socket.socket(); t.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); t.bind(("127.0.0.1", 47123)); t.listen(8)
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.bind(("127.0.0.1", 47124))
x = socket.socket(socket.AF_UNIX); x.bind("\0%s"); x.listen(8)
print("ready", flush=True)
time.sleep(600)
`, name)}}, &ready, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer p.Signal(9)
			if !testreq.Poll(e.Scaled(10*time.Second), func() bool { return strings.Contains(ready.String(), "ready") }) {
				t.Fatalf("the listener did not start in %v: %q", e.Scaled(10*time.Second), ready.String())
			}
			probe := fmt.Sprintf(`
def conn(label, fam, addr):
    s = socket.socket(fam)
    s.settimeout(3)
    try:
        s.connect(addr)
        report(label, "ok")
    except socket.timeout:
        report(label, "ETIMEDOUT")
    except OSError as ex:
        report(label, errname(ex))
conn("tcp", socket.AF_INET, ("127.0.0.1", 47123))
conn("unix", socket.AF_UNIX, "\0%s")
listening = [l.split()[1] for l in open("/proc/net/tcp").readlines()[1:]]
report("tcp_table", "seen" if any(x.endswith(":B7F3") for x in listening) else "none")
`, name)
			if r := e.Py(a, probe); probes(r.Stdout)["tcp"] != "ok" || probes(r.Stdout)["unix"] != "ok" {
				t.Fatalf("the listener is not reachable in its own sandbox: %s", r)
			}
			r := e.Py(b, probe)
			requireRan(t, r)
			e.expectProbes(r, []string{"ECONNREFUSED", "ENOENT", "ETIMEDOUT", "ENETUNREACH"}, "tcp", "unix")
			e.expectProbes(r, []string{"none"}, "tcp_table")
		}},
	{Group: Leak, Name: "shared-memory-and-ipc",
		Want: "System V shared memory, message queues and semaphores and POSIX shared memory made in one sandbox do not exist in another",
		Run: func(t *testing.T, e *Env) {
			a, b := e.Sandbox(nil), e.Sandbox(nil)
			key := 0x4a17 + int(randomHex(1)[0])
			shm := "/dev/shm/airlock-" + randomHex(6)
			ipc := fmt.Sprintf(`
libc = ctypes.CDLL(None, use_errno=True)
KEY, CREATE = %d, %s
def check(label, r):
    report(label, "ok" if r != -1 else errno.errorcode.get(ctypes.get_errno(), "?"))
flags = (0o1000 | 0o666) if CREATE else 0
check("shm", libc.shmget(KEY, 4096, flags))
check("msg", libc.msgget(KEY, flags))
check("sem", libc.semget(KEY, 1 if CREATE else 0, flags))
try:
    if CREATE:
        open(%q, "w").write("x")
    else:
        open(%q).read()
    report("posix_shm", "ok")
except OSError as ex:
    report("posix_shm", errname(ex))
`, key, "%s", shm, shm)
			r := e.Py(a, fmt.Sprintf(ipc, "True"))
			requireRan(t, r)
			e.expectProbes(r, []string{"ok"}, "shm", "msg", "sem", "posix_shm")
			r = e.Py(b, fmt.Sprintf(ipc, "False"))
			requireRan(t, r)
			e.expectProbes(r, []string{"ENOENT"}, "shm", "msg", "sem", "posix_shm")
		}},
	{Group: Leak, Name: "next-sandbox-is-fresh",
		Want: "files a destroyed sandbox left in /workspace, /tmp and /dev/shm are absent from the next sandbox, whose workspace is empty",
		Run: func(t *testing.T, e *Env) {
			a := e.Sandbox(nil)
			token := "leftover" + randomHex(6)
			if r := e.Sh(a, fmt.Sprintf("for d in /workspace /tmp /dev/shm; do echo %s > $d/%s || exit 1; done", token, token)); r.Status.Code != 0 {
				t.Fatalf("write: %s", r)
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := a.Destroy(ctx); err != nil {
				t.Fatal(err)
			}
			b := e.Sandbox(nil)
			r := e.Sh(b, fmt.Sprintf("ls -A /workspace | wc -l; ls -a /tmp /dev/shm; grep -rs %s /workspace /tmp /dev/shm; true", token))
			if strings.Contains(r.Stdout, token) {
				t.Fatalf("the next sandbox sees the last one's files: %s", r)
			}
			if first, _, _ := strings.Cut(r.Stdout, "\n"); strings.TrimSpace(first) != "0" {
				t.Fatalf("the next sandbox's workspace is not empty: %s", r)
			}
		}},
}
