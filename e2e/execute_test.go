package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/testenv"
	"github.com/airlockhq/airlock/internal/testenv/testreq"
)

// groupSize is how many subtests run at once: the machines have 2 cores and
// several cases load a whole CPU or the memory limit.
const groupSize = 3

// e2eCase is one end-to-end case. Most run one request as tenant A and
// check the result; those that need more (several requests, other
// tenants, raw HTTP) set run instead.
type e2eCase struct {
	name  string
	req   airlock.ExecuteRequest
	check func(t *testing.T, s *stack, e *airlock.Execution)
	run   func(t *testing.T, s *stack)
}

const chartCode = "import matplotlib.pyplot as plt\n" +
	"plt.figure(figsize=(6,3))\n" +
	"plt.plot([1,2,3,4],[10,25,18,35],color='#3b82f6')\n" +
	"plt.title('Agent Performance')\n" +
	"plt.savefig('output.png')"

var pngMagic = []byte("\x89PNG\r\n\x1a\n")

// insideCode reports, as JSON, what a program sees of its sandbox.
const insideCode = `import json, os, socket, subprocess
def read(p):
    try:
        with open(p) as f:
            return f.read()
    except OSError as e:
        return "ERR " + e.__class__.__name__
dev = [l.split(":")[0].strip() for l in read("/proc/net/dev").splitlines()[2:] if ":" in l]
routes = [l for l in read("/proc/net/route").splitlines()[1:] if l.strip()]
hosts = subprocess.run(["getent", "hosts", "localhost"], capture_output=True, text=True)
print(json.dumps({
    "ifaces": sorted(n for _, n in socket.if_nameindex()),
    "proc_net_dev": sorted(dev),
    "routes": routes,
    "getent_rc": hosts.returncode,
    "getent_out": hosts.stdout,
    "uid": os.getuid(),
    "euid": os.geteuid(),
    "gid": os.getgid(),
    "host_state": os.path.exists("/var/lib/airlock"),
    "host_repo": os.path.exists("/work/main/go.mod"),
    "pids": sorted(int(p) for p in os.listdir("/proc") if p.isdigit()),
}))
`

// hostileCode leaves files that collection must survive: a symlink to the
// sandbox's /etc/passwd, a hard-link attempt, a FIFO nobody writes, a name
// with a newline, a symlinked directory, and one ordinary file.
const hostileCode = `import os
os.symlink('/etc/passwd', 'leak')
os.symlink('/etc', 'etcdir')
try:
    os.link('/etc/passwd', 'hard')
    print('hard link made')
except OSError as e:
    print('hard link refused:', e.errno)
os.mkfifo('fifo')
with open('name\nwith newline.txt', 'w') as f:
    f.write('nl')
with open('ok.txt', 'w') as f:
    f.write('ok')
`

// TestExecuteEndToEnd runs the documented cases against the whole service,
// first booting a sandbox per request (cold), then as airlockd runs by
// default, from base snapshots and the warm pool (warm).
func TestExecuteEndToEnd(t *testing.T) {
	for _, mode := range []stackMode{cold, warm} {
		t.Run(mode.String(), func(t *testing.T) { runEndToEnd(t, mode) })
	}
}

func runEndToEnd(t *testing.T, mode stackMode) {
	s := newStack(t, mode)
	if mode == warm {
		s.waitWarm(t)
	}
	cases := endToEndCases()
	for g := 0; g*groupSize < len(cases); g++ {
		group := cases[g*groupSize : min((g+1)*groupSize, len(cases))]
		var names []string
		for _, c := range group {
			names = append(names, c.name)
		}
		t.Run(fmt.Sprintf("group%d", g+1), func(t *testing.T) {
			for _, c := range group {
				t.Run(c.name, func(t *testing.T) {
					t.Parallel()
					if c.run != nil {
						c.run(t, s)
						return
					}
					e := s.execute(t, c.req)
					c.check(t, s, e)
				})
			}
		})
		if mode == cold {
			// Every sandbox of the group is gone from the host.
			s.waitClean(t, fmt.Sprintf("after %v", names))
		}
	}

	// How the sandboxes were obtained: all booted when cold; some from
	// the pool or a snapshot when warm, or the warm run proved nothing.
	p, err := s.a.client.ListExecutions(context.Background(), 500, "")
	if err != nil {
		t.Fatal(err)
	}
	sources := map[string]int{}
	for _, e := range p.Executions {
		sources[e.StartSource]++
	}
	t.Logf("%s: %d executions by start source: %v", mode, len(p.Executions), sources)
	switch {
	case mode == cold && sources[airlock.StartCold] != len(p.Executions):
		t.Errorf("cold stack: start sources %v, want all %s", sources, airlock.StartCold)
	case mode == warm && sources[airlock.StartPool]+sources[airlock.StartRestore] == 0:
		t.Errorf("warm stack: start sources %v, want some from the pool or a snapshot", sources)
	}
	s.close(t)
}

// endToEndCases are the cases of TestExecuteEndToEnd, in groups of
// groupSize: each group runs at once. Timing-sensitive cases do not share
// a group with those that load the CPU.
func endToEndCases() []e2eCase {
	return []e2eCase{
		{
			name: "chart-png",
			req:  airlock.ExecuteRequest{Language: airlock.Python, Code: chartCode, TimeoutSec: 15},
			check: func(t *testing.T, s *stack, e *airlock.Execution) {
				wantResult(t, e, 0, false, false)
				a := artifact(t, e, "output.png")
				if a.SizeBytes <= int64(len(pngMagic)) {
					t.Fatalf("output.png is %d bytes", a.SizeBytes)
				}
				var buf bytes.Buffer
				n, err := s.a.client.DownloadArtifact(context.Background(), a, &buf)
				if err != nil {
					t.Fatalf("download output.png: %v", err)
				}
				if n != a.SizeBytes || int64(buf.Len()) != a.SizeBytes {
					t.Errorf("downloaded %d bytes (buffer %d), size_bytes %d", n, buf.Len(), a.SizeBytes)
				}
				if !bytes.HasPrefix(buf.Bytes(), pngMagic) {
					t.Errorf("output.png starts %q, want the PNG signature", buf.Bytes()[:min(8, buf.Len())])
				}
				if a.ContentType != "image/png" {
					t.Errorf("content_type %q, want image/png", a.ContentType)
				}
			},
		},
		{
			name: "python-prints",
			req:  airlock.ExecuteRequest{Language: airlock.Python, Code: "import sys\nprint('hello from python', sys.version_info[0])"},
			check: func(t *testing.T, s *stack, e *airlock.Execution) {
				wantResult(t, e, 0, false, false)
				wantStdout(t, e, "hello from python 3\n")
			},
		},
		{
			name: "bash-prints",
			req:  airlock.ExecuteRequest{Language: airlock.Bash, Code: "x=bash; echo \"hello from $x\""},
			check: func(t *testing.T, s *stack, e *airlock.Execution) {
				wantResult(t, e, 0, false, false)
				wantStdout(t, e, "hello from bash\n")
			},
		},
		{
			name: "node-prints",
			req:  airlock.ExecuteRequest{Language: airlock.Node, Code: "console.log('hello from ' + ['no', 'de'].join(''))"},
			check: func(t *testing.T, s *stack, e *airlock.Execution) {
				wantResult(t, e, 0, false, false)
				wantStdout(t, e, "hello from node\n")
			},
		},
		{
			name: "sql-sums",
			req:  airlock.ExecuteRequest{Language: airlock.SQL, Code: "create table t(a); insert into t values (1),(2); select sum(a) as s from t;"},
			check: func(t *testing.T, s *stack, e *airlock.Execution) {
				wantResult(t, e, 0, false, false)
				lines := strings.Fields(e.Stdout)
				if len(lines) == 0 || lines[0] != "s" || lines[len(lines)-1] != "3" {
					t.Errorf("stdout %q, want the column s and the sum 3", e.Stdout)
				}
				if a := artifact(t, e, "db.sqlite"); a.SizeBytes == 0 {
					t.Errorf("db.sqlite is empty")
				}
			},
		},
		{
			name: "failing-program-is-a-result",
			req:  airlock.ExecuteRequest{Language: airlock.Python, Code: "import sys\nprint('before')\nsys.stderr.write('boom: bad input\\n')\nsys.exit(3)"},
			check: func(t *testing.T, s *stack, e *airlock.Execution) {
				wantResult(t, e, 3, false, false)
				wantStdout(t, e, "before\n")
				if !strings.Contains(e.Stderr, "boom: bad input") {
					t.Errorf("stderr %q, want it kept", e.Stderr)
				}
				if e.Status != airlock.StatusCompleted {
					t.Errorf("status %q, want completed", e.Status)
				}
			},
		},
		{
			name: "timeout",
			req:  airlock.ExecuteRequest{Language: airlock.Python, Code: "print('spinning', flush=True)\nwhile True:\n    pass", TimeoutSec: 2},
			check: func(t *testing.T, s *stack, e *airlock.Execution) {
				wantResult(t, e, 137, true, false)
				if e.DurationMS < 2000 || e.DurationMS > 5000 {
					t.Errorf("duration_ms %d, want 2000..5000", e.DurationMS)
				}
				wantStdout(t, e, "spinning\n")
			},
		},
		{
			name: "out-of-memory",
			req: airlock.ExecuteRequest{Language: airlock.Python, TimeoutSec: 30, Code: "b = bytearray(2 << 30)\n" +
				"for i in range(0, len(b), 4096):\n    b[i] = 1\nprint('survived')"},
			check: func(t *testing.T, s *stack, e *airlock.Execution) {
				wantResult(t, e, 137, false, true)
				if strings.Contains(e.Stdout, "survived") {
					t.Errorf("the 2 GiB allocation survived a %d MiB limit", airlock.DefaultLimits.MemoryBytes>>20)
				}
				if e.PeakMemoryMB < 100 {
					t.Errorf("peak_memory_mb %d, want near the limit", e.PeakMemoryMB)
				}
			},
		},
		{
			name: "inside-the-sandbox",
			req:  airlock.ExecuteRequest{Language: airlock.Python, Code: insideCode},
			check: func(t *testing.T, s *stack, e *airlock.Execution) {
				wantResult(t, e, 0, false, false)
				var got struct {
					Ifaces     []string `json:"ifaces"`
					ProcNetDev []string `json:"proc_net_dev"`
					Routes     []string `json:"routes"`
					GetentRC   int      `json:"getent_rc"`
					GetentOut  string   `json:"getent_out"`
					UID        int      `json:"uid"`
					EUID       int      `json:"euid"`
					GID        int      `json:"gid"`
					HostState  bool     `json:"host_state"`
					HostRepo   bool     `json:"host_repo"`
					Pids       []int    `json:"pids"`
				}
				if err := json.Unmarshal([]byte(e.Stdout), &got); err != nil {
					t.Fatalf("stdout is not the report: %v: %q (stderr %q)", err, e.Stdout, e.Stderr)
				}
				t.Logf("inside: %+v", got)
				for _, names := range [][]string{got.Ifaces, got.ProcNetDev} {
					if len(names) != 1 || names[0] != "lo" {
						t.Errorf("network interfaces %v, want only lo", names)
					}
				}
				if len(got.Routes) != 0 {
					t.Errorf("routes %v, want none", got.Routes)
				}
				if got.GetentRC != 0 || !strings.Contains(got.GetentOut, "localhost") {
					t.Errorf("getent hosts localhost: rc %d, %q", got.GetentRC, got.GetentOut)
				}
				if got.UID != 1000 || got.EUID != 1000 || got.GID != 1000 {
					t.Errorf("uid %d euid %d gid %d, want 1000", got.UID, got.EUID, got.GID)
				}
				if got.HostState || got.HostRepo {
					t.Errorf("host files visible: /var/lib/airlock %v, /work/main %v", got.HostState, got.HostRepo)
				}
				if len(got.Pids) == 0 || len(got.Pids) > 8 {
					t.Errorf("/proc lists %d processes %v, want a few", len(got.Pids), got.Pids)
				}
			},
		},
		{
			name: "fork-bomb-contained",
			run: func(t *testing.T, s *stack) {
				start := time.Now()
				e := s.execute(t, airlock.ExecuteRequest{Language: airlock.Python, TimeoutSec: 10,
					Code: "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass"})
				t.Logf("fork bomb: %v exit %d timed_out %v oom %v peak %d MiB, stderr %.200q",
					time.Since(start), e.ExitCode, e.TimedOut, e.OOMKilled, e.PeakMemoryMB, e.Stderr)
				if !e.TimedOut && !e.OOMKilled && e.ExitCode == 0 {
					t.Errorf("fork bomb ended normally: %+v", e)
				}
				if d := time.Since(start); d > 40*time.Second {
					t.Errorf("fork bomb took %v to contain", d)
				}
				start = time.Now()
				e = s.execute(t, airlock.ExecuteRequest{Language: airlock.Bash, Code: "echo still serving"})
				wantResult(t, e, 0, false, false)
				wantStdout(t, e, "still serving\n")
				if d := time.Since(start); d > 15*time.Second {
					t.Errorf("next request took %v", d)
				}
			},
		},
		{
			name: "disk-full",
			req:  airlock.ExecuteRequest{Language: airlock.Bash, TimeoutSec: 45, Code: "dd if=/dev/zero of=big bs=1M count=700"},
			check: func(t *testing.T, s *stack, e *airlock.Execution) {
				if !strings.Contains(e.Stderr, "No space left on device") {
					t.Errorf("stderr %q, want No space left on device", e.Stderr)
				}
				if e.ExitCode == 0 || e.TimedOut || e.OOMKilled {
					t.Errorf("exit %d timed_out %v oom_killed %v, want dd to fail on its own", e.ExitCode, e.TimedOut, e.OOMKilled)
				}
				for _, a := range e.Artifacts {
					if a.Filename == "big" {
						t.Errorf("a %d-byte file was collected past the 100 MiB artifact cap", a.SizeBytes)
					}
				}
				if !e.ArtifactsTruncated {
					t.Errorf("artifacts_truncated false, want true: big was left out")
				}
			},
		},
		{
			name: "stdout-capped",
			req:  airlock.ExecuteRequest{Language: airlock.Python, Code: "import sys\nsys.stdout.write('x' * (50 << 20))\nsys.stdout.flush()\nprint('done', file=sys.stderr)"},
			check: func(t *testing.T, s *stack, e *airlock.Execution) {
				wantResult(t, e, 0, false, false)
				if !e.StdoutTruncated || len(e.Stdout) != 1<<20 {
					t.Errorf("stdout_truncated %v, len %d; want true and %d", e.StdoutTruncated, len(e.Stdout), 1<<20)
				}
				if strings.Trim(e.Stdout, "x") != "" {
					t.Errorf("stdout is not only the program's output")
				}
				if e.StderrTruncated || e.Stderr != "done\n" {
					t.Errorf("stderr %q truncated %v, want done", e.Stderr, e.StderrTruncated)
				}
			},
		},
		{
			name: "hostile-workspace-files",
			run: func(t *testing.T, s *stack) {
				start := time.Now()
				e := s.execute(t, airlock.ExecuteRequest{Language: airlock.Python, Code: hostileCode, TimeoutSec: 10})
				t.Logf("%v: stdout %q, artifacts %v", time.Since(start), e.Stdout, artifactNames(e))
				wantResult(t, e, 0, false, false)
				if d := time.Since(start); d > 20*time.Second {
					t.Errorf("collection took %v: a FIFO may have blocked it", d)
				}
				hostPasswd, _ := os.ReadFile("/etc/passwd")
				for _, a := range e.Artifacts {
					switch a.Filename {
					case "leak", "etcdir", "fifo":
						t.Errorf("%s was collected: %+v", a.Filename, a)
						continue
					}
					var buf bytes.Buffer
					if _, err := s.a.client.DownloadArtifact(context.Background(), a, &buf); err != nil {
						t.Errorf("download %q: %v", a.Filename, err)
						continue
					}
					if len(hostPasswd) > 0 && bytes.Equal(buf.Bytes(), hostPasswd) {
						t.Errorf("artifact %q holds the host's /etc/passwd", a.Filename)
					}
					if strings.HasPrefix(a.Filename, "etc") || strings.Contains(buf.String(), "root:x:0:0") {
						t.Errorf("artifact %q carries a passwd file", a.Filename)
					}
					if a.Filename == "name\nwith newline.txt" && buf.String() != "nl" {
						t.Errorf("newline file holds %q", buf.String())
					}
					// The download's headers must not be split by the name.
					r := s.do(t, http.MethodGet, a.URL, "", nil, nil)
					if cd := r.header.Get("Content-Disposition"); r.status != 200 || strings.ContainsAny(cd, "\r\n") {
						t.Errorf("download %q: status %d, Content-Disposition %q", a.Filename, r.status, cd)
					}
				}
				ok := artifact(t, e, "ok.txt")
				if ok.SizeBytes != 2 {
					t.Errorf("ok.txt is %d bytes, want 2", ok.SizeBytes)
				}
			},
		},
		{
			name: "artifacts-only-for-owner",
			run: func(t *testing.T, s *stack) {
				e := s.execute(t, airlock.ExecuteRequest{Language: airlock.Bash, Code: "echo 'for tenant A only' > secret.txt"})
				wantResult(t, e, 0, false, false)
				a := artifact(t, e, "secret.txt")
				const want = "for tenant A only\n"

				// Tenant B learns nothing: the execution and the artifact are 404.
				s.do(t, http.MethodGet, "/v1/executions/"+e.ID, s.b.key, nil, nil).problem(t, http.StatusNotFound)
				s.do(t, http.MethodGet, "/v1/artifacts/"+a.ID, s.b.key, nil, nil).problem(t, http.StatusNotFound)
				// Nor does anybody without a key or token, or with a forged one.
				s.do(t, http.MethodGet, "/v1/artifacts/"+a.ID, "", nil, nil).problem(t, http.StatusNotFound)
				forged := strings.Replace(a.URL, "token=", "token=0", 1)
				forged = forged[:len(forged)-1]
				s.do(t, http.MethodGet, forged, "", nil, nil).problem(t, http.StatusNotFound)
				// A's signing for tenant B's ID does not work either.
				swapped := strings.Replace(a.URL, "tenant="+s.a.tenant.ID, "tenant="+s.b.tenant.ID, 1)
				s.do(t, http.MethodGet, swapped, "", nil, nil).problem(t, http.StatusNotFound)

				// The signed URL works with no key at all; A's key works without a token.
				for _, r := range []rawResponse{
					s.do(t, http.MethodGet, a.URL, "", nil, nil),
					s.do(t, http.MethodGet, "/v1/artifacts/"+a.ID, s.a.key, nil, nil),
				} {
					if r.status != http.StatusOK || string(r.body) != want {
						t.Errorf("owner download: status %d body %q, want 200 %q", r.status, r.body, want)
					}
				}
				// B's list does not show it.
				p, err := s.b.client.ListExecutions(context.Background(), 0, "")
				if err != nil {
					t.Fatal(err)
				}
				for _, x := range p.Executions {
					if x.ID == e.ID {
						t.Errorf("tenant B lists tenant A's execution %s", e.ID)
					}
				}
			},
		},
		{
			name: "serves-others-while-busy",
			run: func(t *testing.T, s *stack) {
				type result struct {
					e   *airlock.Execution
					err error
					at  time.Time
				}
				long := make(chan result, 1)
				start := time.Now()
				// The long program leaves a mark in its /tmp, which the
				// gVisor backend keeps on the host (see runsDir).
				marker := "started-" + testenv.RandomID()
				longCode := "touch /tmp/" + marker + "; sleep 8; echo slept"
				go func() {
					ctx, cancel := context.WithTimeout(context.Background(), maxTimeout)
					defer cancel()
					e, err := s.a.client.Execute(ctx, airlock.ExecuteRequest{Language: airlock.Bash, Code: longCode})
					long <- result{e, err, time.Now()}
				}()
				// Let the long one get its sandbox and run first.
				pattern := filepath.Join(s.runsDir(), "*", "disk", "tmp", marker)
				testreq.Eventually(t, time.Minute, "the long program to run (its mark "+pattern+")", func() bool {
					m, _ := filepath.Glob(pattern)
					return len(m) > 0
				})
				qstart := time.Now()
				e := s.execute(t, airlock.ExecuteRequest{Language: airlock.Bash, Code: "echo quick"})
				quickDone := time.Now()
				wantResult(t, e, 0, false, false)
				wantStdout(t, e, "quick\n")
				r := <-long
				if r.err != nil {
					t.Fatalf("long execution: %v", r.err)
				}
				wantResult(t, r.e, 0, false, false)
				wantStdout(t, r.e, "slept\n")
				t.Logf("quick took %v; long took %v", quickDone.Sub(qstart), r.at.Sub(start))
				if !quickDone.Before(r.at) {
					t.Errorf("the quick request finished at %v, after the long one (%v): it waited", quickDone.Sub(start), r.at.Sub(start))
				}
				if d := quickDone.Sub(qstart); d > 5*time.Second {
					t.Errorf("quick request took %v while another ran", d)
				}
			},
		},
		{
			// Warm sandboxes are clones of one snapshot: each must draw
			// its own randomness and IDs (the modules are preloaded).
			name: "clones-differ",
			run: func(t *testing.T, s *stack) {
				seen := map[string]bool{}
				for i := 0; i < 3; i++ {
					e := s.execute(t, airlock.ExecuteRequest{Language: airlock.Python,
						Code: "import random, uuid, secrets, os\nprint(random.random(), uuid.uuid4(), secrets.token_hex(8), os.urandom(8).hex())"})
					wantResult(t, e, 0, false, false)
					t.Logf("%s: %s", e.StartSource, strings.TrimSpace(e.Stdout))
					for _, v := range strings.Fields(e.Stdout) {
						if seen[v] {
							t.Errorf("value %s drawn twice (start source %s)", v, e.StartSource)
						}
						seen[v] = true
					}
				}
			},
		},
	}
}

// wantResult checks the outcome fields of an execution.
func wantResult(t *testing.T, e *airlock.Execution, exit int, timedOut, oom bool) {
	t.Helper()
	if e.ExitCode != exit || e.TimedOut != timedOut || e.OOMKilled != oom {
		t.Errorf("exit_code %d timed_out %v oom_killed %v, want %d %v %v (stdout %.200q, stderr %.300q)",
			e.ExitCode, e.TimedOut, e.OOMKilled, exit, timedOut, oom, e.Stdout, e.Stderr)
	}
	if e.ID == "" || e.Status != airlock.StatusCompleted {
		t.Errorf("execution_id %q status %q, want an ID and completed", e.ID, e.Status)
	}
}

func wantStdout(t *testing.T, e *airlock.Execution, want string) {
	t.Helper()
	if e.Stdout != want {
		t.Errorf("stdout %q, want %q (stderr %.300q)", e.Stdout, want, e.Stderr)
	}
}

// artifact returns the execution's artifact called name or fails.
func artifact(t *testing.T, e *airlock.Execution, name string) airlock.Artifact {
	t.Helper()
	for _, a := range e.Artifacts {
		if a.Filename == name {
			if a.URL == "" || a.ID == "" {
				t.Fatalf("artifact %s has no ID or URL: %+v", name, a)
			}
			return a
		}
	}
	t.Fatalf("no artifact %q among %v (stderr %.300q)", name, artifactNames(e), e.Stderr)
	return airlock.Artifact{}
}

func artifactNames(e *airlock.Execution) []string {
	var out []string
	for _, a := range e.Artifacts {
		out = append(out, a.Filename)
	}
	return out
}
