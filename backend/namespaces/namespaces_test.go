package namespaces_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/agent/protocol"
	"github.com/airlockhq/airlock/backend/namespaces"
	"github.com/airlockhq/airlock/backend/namespaces/nsinit"
	"github.com/airlockhq/airlock/internal/harden"
	"github.com/airlockhq/airlock/internal/testenv"
)

func newSandbox(t *testing.T, b *namespaces.Backend, limits airlock.Limits) *namespaces.Sandbox {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sb, err := b.Create(ctx, airlock.SandboxSpec{ID: "t-" + testenv.RandomID(), Image: testenv.Image(t, "base"), Limits: limits})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	t.Cleanup(func() {
		if err := sb.Destroy(context.Background()); err != nil {
			t.Errorf("destroy: %v", err)
		}
	})
	return sb.(*namespaces.Sandbox)
}

func run(t *testing.T, sb airlock.Sandbox, argv ...string) (string, string, protocol.ExitStatus) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out, errb bytes.Buffer
	p, err := sb.Agent().Exec(ctx, protocol.ExecRequest{Argv: argv}, &out, &errb)
	if err != nil {
		t.Fatalf("exec %v: %v", argv, err)
	}
	st, err := p.Wait(ctx)
	if err != nil {
		t.Fatalf("wait %v: %v", argv, err)
	}
	return out.String(), errb.String(), st
}

// Everything the init stage promises, seen from inside.
func TestConfinement(t *testing.T) {
	b := testenv.Namespaces(t)
	sb := newSandbox(t, b, airlock.DefaultLimits)
	cfg := b.Config()
	if uid := sb.HostUID(); uid < cfg.UIDBase || uid >= cfg.UIDBase+cfg.UIDCount {
		t.Errorf("host uid %d outside the range %d+%d", uid, cfg.UIDBase, cfg.UIDCount)
	}
	if want := nsinit.LandlockABI(); sb.LandlockABI() != want {
		t.Errorf("Landlock ABI %d applied, the kernel offers %d", sb.LandlockABI(), want)
	}
	status, _, _ := run(t, sb, "cat", "/proc/self/status")
	for _, want := range []string{"CapInh:\t0000000000000000", "CapPrm:\t0000000000000000", "CapEff:\t0000000000000000",
		"CapBnd:\t0000000000000000", "CapAmb:\t0000000000000000", "NoNewPrivs:\t1", "Seccomp:\t2"} {
		if !strings.Contains(status, want) {
			t.Errorf("/proc/self/status lacks %q", want)
		}
	}
	tests := []struct {
		name string
		argv []string
		want string
	}{
		{"sandbox user", []string{"id"}, "uid=1000(sandbox) gid=1000(sandbox) groups=1000(sandbox)\n"},
		{"only the sandbox user is mapped", []string{"sh", "-c", "echo $(cat /proc/self/uid_map)"}, fmt.Sprintf("1000 %d 1\n", sb.HostUID())},
		{"hostname", []string{"hostname"}, "sandbox\n"},
		{"cgroup namespace", []string{"cat", "/proc/self/cgroup"}, ":/\n"},
		{"agent is PID 1", []string{"sh", "-c", "tr '\\0' ' ' < /proc/1/cmdline"}, "/opt/airlock/bin/airlock-agent"},
		{"agent's memory out of reach", []string{"sh", "-c", "cat /proc/1/environ 2>/dev/null || echo refused"}, "refused\n"},
		{"rlimits", []string{"sh", "-c", "ulimit -n; ulimit -c"}, "4096\n0\n"},
		{"root read-only", []string{"sh", "-c", "touch /etc/x 2>&1 | grep -c 'Read-only'"}, "1\n"},
		{"loopback up", []string{"cat", "/sys/class/net/lo/operstate"}, ""},
		{"workspace is the cwd", []string{"pwd"}, "/workspace\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, errOut, _ := run(t, sb, tt.argv...)
			if tt.want != "" && !strings.Contains(out, tt.want) {
				t.Errorf("%v: %q (stderr %q), want %q", tt.argv, out, errOut, tt.want)
			}
		})
	}
	// Every namespace differs from the host's.
	for _, ns := range []string{"user", "pid", "mnt", "net", "ipc", "uts", "cgroup"} {
		host, err := os.Readlink("/proc/self/ns/" + ns)
		if err != nil {
			t.Fatal(err)
		}
		in, _, _ := run(t, sb, "readlink", "/proc/self/ns/"+ns)
		if strings.TrimSpace(in) == host {
			t.Errorf("the sandbox shares the host's %s namespace (%s)", ns, host)
		}
	}
	// Loopback works.
	out, errOut, _ := run(t, sb, "python3", "-c", `
import socket
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(1)
c = socket.create_connection(s.getsockname()); print("ok")`)
	if out != "ok\n" {
		t.Errorf("loopback: %q %q", out, errOut)
	}
}

// Every syscall the filter denies fails with EPERM and the program goes
// on (it is not killed); clone3 and syscalls newer than the table fail
// with ENOSYS, so a C library falls back; allowed ones work.
func TestSeccompDeniesWithEPERM(t *testing.T) {
	b := testenv.Namespaces(t)
	sb := newSandbox(t, b, airlock.DefaultLimits)
	denied, _ := json.Marshal(harden.DeniedSyscalls())
	out, errOut, st := run(t, sb, "python3", "-c", fmt.Sprintf(`
import ctypes, errno, json, socket
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def call(nr, *args):
    ctypes.set_errno(0)
    r = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) for a in args])
    return r, ctypes.get_errno()
bad = []
for nr in json.loads(%q):
    r, e = call(nr, 0, 0, 0, 0, 0, 0)
    if r != -1 or e != errno.EPERM:
        bad.append((nr, r, errno.errorcode.get(e)))
print("denied-not-eperm", bad)
print("clone3", errno.errorcode.get(call(%d, 0, 0)[1]))
print("unknown", errno.errorcode.get(call(%d)[1]))
print("getpid", call(%d)[0] > 0)
try:
    socket.socket(17, socket.SOCK_RAW, 0)
except OSError as ex:
    print("packet", errno.errorcode.get(ex.errno))
print("survived")
`, string(denied), sysClone3, lastSyscall+50, sysGetpid))
	if st.Code != 0 {
		t.Fatalf("the probe died: %+v %q %q", st, out, errOut)
	}
	for _, want := range []string{"denied-not-eperm []", "clone3 ENOSYS", "unknown ENOSYS", "getpid True", "packet EPERM", "survived"} {
		if !strings.Contains(out, want) {
			t.Errorf("want %q in:\n%s%s", want, out, errOut)
		}
	}
}

// A crashed server leaves a sandbox running; a new backend on the same
// state reconciles it away: processes, mounts, cgroup, run directory.
func TestReconcileAfterCrash(t *testing.T) {
	b := testenv.Namespaces(t)
	sb := newSandbox(t, b, airlock.DefaultLimits)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := sb.Agent().Exec(ctx, protocol.ExecRequest{Argv: []string{"sleep", "600"}}, nil, nil); err != nil {
		t.Fatal(err)
	}
	cfg := b.Config()
	b2, err := namespaces.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := b2.Reconcile(ctx)
	if err != nil {
		t.Fatalf("reconcile: %v", err)
	}
	if len(ids) != 1 || ids[0] != sb.ID() {
		t.Errorf("reconciled %v, want [%s]", ids, sb.ID())
	}
	select {
	case <-sb.Done():
	case <-time.After(10 * time.Second):
		t.Fatalf("the sandbox still runs after the reconcile")
	}
	if err := b2.CheckClean(ctx); err != nil {
		t.Errorf("not clean after the reconcile: %v", err)
	}
	if _, err := os.Stat(filepath.Join(cfg.StateDir, "sandboxes", sb.ID())); !os.IsNotExist(err) {
		t.Errorf("run directory left: %v", err)
	}
	b2.Close()
}

// Stats come from the sandbox's cgroup.
func TestStats(t *testing.T) {
	b := testenv.Namespaces(t)
	sb := newSandbox(t, b, airlock.DefaultLimits)
	run(t, sb, "python3", "-c", "x = bytearray(64 << 20); print(len(x))")
	st, err := sb.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if st.PeakMemoryBytes < 64<<20 || st.CPUTime <= 0 || st.OOMKilled {
		t.Errorf("stats %+v: want a peak above 64 MiB, some CPU time, no OOM", st)
	}
}

// BenchmarkCreateRunDestroy is one sandbox's whole life: create, run a
// program, destroy. See also 'airlock bench-backends'.
func BenchmarkCreateRunDestroy(b *testing.B) {
	for _, prog := range [][]string{{"/bin/true"}, {"python3", "-c", "print(1)"}} {
		b.Run(strconv.Quote(strings.Join(prog, " ")), func(b *testing.B) {
			be := testenv.Namespaces(b)
			img := testenv.Image(b, "base")
			ctx := context.Background()
			for b.Loop() {
				sb, err := be.Create(ctx, airlock.SandboxSpec{ID: "b-" + testenv.RandomID(), Image: img, Limits: airlock.DefaultLimits})
				if err != nil {
					b.Fatal(err)
				}
				p, err := sb.Agent().Exec(ctx, protocol.ExecRequest{Argv: prog}, nil, nil)
				if err != nil {
					b.Fatal(err)
				}
				if st, err := p.Wait(ctx); err != nil || st.Code != 0 {
					b.Fatalf("%v: %+v %v", prog, st, err)
				}
				if err := sb.Destroy(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
