package conformance

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var escapeCases = []Case{
	{Group: Escape, Name: "host-file-via-proc-root",
		Want: "the host canary file is unreadable through /proc/1/root, /proc/self/root, /proc/*/root, /proc/*/cwd and its own path",
		Run: func(t *testing.T, e *Env) {
			sb := e.Sandbox(nil)
			p, _ := e.Canary()
			r := e.Sh(sb, fmt.Sprintf(`P=%q
for f in "$P" /proc/1/root"$P" /proc/self/root"$P" /proc/*/root"$P" /proc/1/cwd/../../../../..$P /proc/self/cwd/../../../../..$P /proc/*/cwd/../../../../..$P; do cat "$f" 2>&1; done
echo end`, p))
			e.NoCanary(r)
			if !strings.Contains(r.Stdout, "end") {
				t.Fatalf("the probe did not finish: %s", r)
			}
		}},
	{Group: Escape, Name: "dotdot-from-cwd",
		Want: "climbing .. from /proc/self/cwd ends at the sandbox's own root, and the host canary stays unreadable from there",
		Run: func(t *testing.T, e *Env) {
			sb := e.Sandbox(nil)
			p, _ := e.Canary()
			r := e.Py(sb, fmt.Sprintf(`
os.chdir("/proc/self/cwd")
for _ in range(64):
    os.chdir("..")
here, root = os.stat("."), os.stat("/")
report("at_root", "yes" if (here.st_dev, here.st_ino) == (root.st_dev, root.st_ino) else "no")
report("has_workspace", "yes" if "workspace" in os.listdir(".") else "no")
tryop("canary", lambda: print(open("." + %q).read()))
`, p))
			requireRan(t, r)
			e.NoCanary(r)
			got := probes(r.Stdout)
			if got["at_root"] != "yes" || got["has_workspace"] != "yes" {
				t.Fatalf(".. from the working directory left the sandbox's root: %s", r)
			}
		}},
	{Group: Escape, Name: "dotdot-through-mounts",
		Want: "from every mount point inside the sandbox, .. leads back to the sandbox's root; no host run directory (disk image, labels, bundle) is visible anywhere",
		Run: func(t *testing.T, e *Env) {
			sb := e.Sandbox(nil)
			r := e.Py(sb, `
root = os.stat("/")
mps = []
for line in open("/proc/self/mountinfo"):
    f = line.split()
    if len(f) > 4:
        mps.append(f[4].encode().decode("unicode_escape"))
bad = []
for mp in mps:
    try:
        os.chdir(mp)
        for _ in range(64):
            os.chdir("..")
        st = os.stat(".")
        if (st.st_dev, st.st_ino) != (root.st_dev, root.st_ino):
            bad.append(mp)
    except OSError:
        pass
report("mounts", len(mps))
report("escaped", ",".join(bad) or "none")
seen = []
for d in ["/", "/workspace/..", "/tmp/..", "/workspace", "/tmp", "/dev/..", "/proc/self/cwd/.."]:
    try:
        seen += os.listdir(d)
    except OSError:
        pass
hits = [n for n in seen if n in ("disk.img", "labels.json", "bundle", "sandbox.log", "disk", "sandboxes")]
report("runfiles", ",".join(hits) or "none")
`)
			requireRan(t, r)
			got := probes(r.Stdout)
			if got["escaped"] != "none" || got["runfiles"] != "none" {
				t.Fatalf("a mount point led out of the sandbox: %s", r)
			}
		}},
	{Group: Escape, Name: "proc-kcore",
		Want: "/proc/kcore gives no kernel memory: it is absent, unreadable or empty",
		Run: func(t *testing.T, e *Env) {
			sb := e.Sandbox(nil)
			r := e.Py(sb, `
def rd(p):
    with open(p, "rb") as f:
        d = f.read(64)
    if d:
        raise OSError(errno.EEXIST, "read %d bytes" % len(d))
def syms():
    for line in open("/proc/kallsyms"):
        if line.split()[0].strip("0"):
            raise OSError(errno.EEXIST, "kernel addresses")
tryop("kcore", lambda: rd("/proc/kcore"))
tryop("kallsyms_addr", syms)
`)
			requireRan(t, r)
			e.expectProbes(r, append([]string{"ok"}, refused...), "kcore", "kallsyms_addr")
		}},
	{Group: Escape, Name: "dev-mem",
		Want: "/dev/mem, /dev/kmem and /dev/port cannot be opened",
		Run: func(t *testing.T, e *Env) {
			sb := e.Sandbox(nil)
			r := e.Py(sb, `
for n in ("mem", "kmem", "port"):
    tryop(n, lambda: os.close(os.open("/dev/" + n, os.O_RDONLY)))
`)
			requireRan(t, r)
			e.expectProbes(r, refused, "mem", "kmem", "port")
		}},
	{Group: Escape, Name: "mount",
		Want: "mount(2), umount2(2), pivot_root(2) and the mount(8) program all fail",
		Run: func(t *testing.T, e *Env) {
			sb := e.Sandbox(nil)
			r := e.Py(sb, `
import subprocess
report("mount_tmpfs", sc("mount", b"none", b"/tmp", b"tmpfs", 0, None)[1])
report("mount_bind", sc("mount", b"/", b"/workspace", None, 4096, None)[1])
report("umount_proc", sc("umount2", b"/proc", 2)[1])
report("pivot_root", sc("pivot_root", b"/tmp", b"/tmp")[1])
p = subprocess.run(["mount", "-t", "tmpfs", "none", "/mnt"], capture_output=True)
report("mount_cmd", "ok" if p.returncode == 0 else "EPERM")
`)
			requireRan(t, r)
			e.expectProbes(r, refused, "mount_tmpfs", "mount_bind", "umount_proc", "pivot_root", "mount_cmd")
		}},
	{Group: Escape, Name: "unshare-and-clone-namespaces",
		Want: "unshare(2) and clone(2) with namespace flags fail with EPERM; on a backend with its own kernel they may succeed inside that kernel, and the host canary stays unreadable after",
		Run: func(t *testing.T, e *Env) {
			sb := e.Sandbox(nil)
			p, _ := e.Canary()
			r := e.Py(sb, fmt.Sprintf(`
CLONE_NEWNS, CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x20000, 0x10000000, 0x20000000, 0x40000000
r = sc("clone", CLONE_NEWUSER | CLONE_NEWNS | 17, 0, 0, 0, 0)
if r[0] == 0:
    os._exit(0)
if r[0] > 0:
    os.waitpid(r[0], 0)
report("clone_userns", r[1])
report("unshare_net", sc("unshare", CLONE_NEWNET)[1])
report("unshare_user", sc("unshare", CLONE_NEWUSER | CLONE_NEWNS)[1])
for path in (%q, "/proc/1/root" + %q):
    try:
        print(open(path).read())
    except OSError:
        pass
`, p, p))
			requireRan(t, r)
			e.NoCanary(r)
			allowed := []string{"EPERM"}
			if e.Caps().SeparateKernel {
				allowed = append([]string{"ok"}, refused...)
			}
			e.expectProbes(r, allowed, "clone_userns", "unshare_net", "unshare_user")
		}},
	{Group: Escape, Name: "setns",
		Want: "setns(2) into any namespace the agent is in fails",
		Run: func(t *testing.T, e *Env) {
			sb := e.Sandbox(nil)
			r := e.Py(sb, `
for ns in ("mnt", "net", "pid", "user", "uts", "ipc", "cgroup"):
    for who in ("1", "self"):
        label = "setns_%s_%s" % (who, ns)
        try:
            fd = os.open("/proc/%s/ns/%s" % (who, ns), os.O_RDONLY)
        except OSError as ex:
            report(label, errname(ex))
            continue
        report(label, sc("setns", fd, 0)[1])
        os.close(fd)
`)
			requireRan(t, r)
			var labels []string
			for _, ns := range []string{"mnt", "net", "pid", "user", "uts", "ipc", "cgroup"} {
				labels = append(labels, "setns_1_"+ns, "setns_self_"+ns)
			}
			e.expectProbes(r, refused, labels...)
		}},
	{Group: Escape, Name: "ptrace-agent",
		Want: "ptrace attach or seize of the agent (PID 1), process_vm_readv of it, and opening its /proc/1/mem, environ and protocol descriptors all fail",
		Run: func(t *testing.T, e *Env) {
			sb := e.Sandbox(nil)
			r := e.Py(sb, `
report("attach", sc("ptrace", 16, 1, 0, 0)[1])
report("seize", sc("ptrace", 0x4206, 1, 0, 0)[1])
buf = ctypes.create_string_buffer(64)
class iovec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]
local = iovec(ctypes.cast(buf, ctypes.c_void_p), 64)
remote = iovec(0x400000, 64)
report("vm_readv", sc("process_vm_readv", 1, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0)[1])
tryop("mem", lambda: open("/proc/1/mem", "rb").read(1))
tryop("environ", lambda: open("/proc/1/environ", "rb").read())
tryop("fd0", lambda: os.close(os.open("/proc/1/fd/0", os.O_RDONLY)))
tryop("fd1", lambda: os.close(os.open("/proc/1/fd/1", os.O_WRONLY)))
`)
			requireRan(t, r)
			e.expectProbes(r, refused, "attach", "seize", "vm_readv", "mem", "environ", "fd0", "fd1")
			e.Alive(sb)
		}},
	{Group: Escape, Name: "signal-agent",
		Want: "no signal a program can send to PID 1 or to every process (kill -1), other than SIGKILL and SIGSTOP, stops or ends the agent: it still answers and runs the next program",
		Run: func(t *testing.T, e *Env) {
			sb := e.Sandbox(nil)
			r := e.Sh(sb, `for s in TERM INT HUP QUIT ABRT SEGV BUS FPE ILL TRAP SYS USR1 USR2 ALRM PIPE TSTP TTIN TTOU CONT; do kill -s $s 1 2>/dev/null; done
sleep 0.2; echo sent; kill -TERM -1; kill -KILL -1`)
			if !strings.Contains(r.Stdout, "sent") {
				t.Fatalf("the probe did not run: %s", r)
			}
			// A signal's effect is not always immediate: give a wrong
			// one a moment to end the agent before checking it did not.
			time.Sleep(200 * time.Millisecond)
			e.Alive(sb)
		}},
	{Group: Escape, Name: "kill-or-stop-agent",
		Want: "SIGKILL or SIGSTOP sent to PID 1 from inside stays inside: the agent survives (Linux drops both when they are sent to a namespace's init from within it), or only its own sandbox ends or stops; either way Destroy removes all of it within 15 s and a new sandbox runs",
		Run: func(t *testing.T, e *Env) {
			for _, sig := range []string{"STOP", "KILL"} {
				sb := e.Sandbox(nil)
				e.Sh(sb, "kill -s "+sig+" 1; sleep 0.3; echo sent")
				ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
				_, err := sb.Agent().Health(ctx)
				cancel()
				if err != nil {
					t.Logf("SIGSTOP or SIGKILL from inside reached the agent (%v): only its own sandbox is affected", err)
				}
				ctx, cancel = context.WithTimeout(context.Background(), 15*time.Second)
				start := time.Now()
				if err := sb.Destroy(ctx); err != nil {
					t.Errorf("destroy after SIG%s: %v", sig, err)
				}
				cancel()
				if d := time.Since(start); d > 15*time.Second {
					t.Errorf("destroy after SIG%s took %v", sig, d)
				}
			}
			e.Alive(e.Sandbox(nil))
		}},
	{Group: Escape, Name: "kernel-module",
		Want: "init_module, finit_module and delete_module fail",
		Run: func(t *testing.T, e *Env) {
			sb := e.Sandbox(nil)
			r := e.Py(sb, `
img = ctypes.create_string_buffer(b"\x7fELF" + b"\0" * 60)
report("init_module", sc("init_module", img, 64, b"")[1])
fd = os.open("/bin/true", os.O_RDONLY)
report("finit_module", sc("finit_module", fd, b"", 0)[1])
report("delete_module", sc("delete_module", b"loop", 0x800)[1])
`)
			requireRan(t, r)
			e.expectProbes(r, denied, "init_module", "finit_module", "delete_module")
		}},
	{Group: Escape, Name: "raw-and-packet-sockets",
		Want: "raw IPv4 and IPv6 sockets and packet sockets cannot be created",
		Run: func(t *testing.T, e *Env) {
			sb := e.Sandbox(nil)
			r := e.Py(sb, `
tryop("raw4", lambda: socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP))
tryop("raw6", lambda: socket.socket(socket.AF_INET6, socket.SOCK_RAW, 58))
tryop("packet", lambda: socket.socket(17, socket.SOCK_RAW, 0x0300))
tryop("packet_dgram", lambda: socket.socket(17, socket.SOCK_DGRAM, 0x0300))
`)
			requireRan(t, r)
			e.expectProbes(r, refused, "raw4", "raw6", "packet", "packet_dgram")
		}},
	{Group: Escape, Name: "write-sys",
		Want: "writes to /sys fail, and the host's sysfs values stay as they were",
		Run: func(t *testing.T, e *Env) {
			files := []string{"/sys/kernel/mm/ksm/pages_to_scan", "/sys/kernel/mm/ksm/sleep_millisecs", "/sys/kernel/mm/transparent_hugepage/defrag"}
			before := readHostFiles(files)
			sb := e.Sandbox(nil)
			r := e.Py(sb, `
def wr(p, v):
    with open(p, "w") as f:
        f.write(v)
tryop("ksm_pages", lambda: wr("/sys/kernel/mm/ksm/pages_to_scan", "4321"))
tryop("ksm_sleep", lambda: wr("/sys/kernel/mm/ksm/sleep_millisecs", "4321"))
tryop("thp", lambda: wr("/sys/kernel/mm/transparent_hugepage/defrag", "never"))
tryop("uevent", lambda: wr("/sys/kernel/uevent_helper", "/workspace/pwn"))
`)
			requireRan(t, r)
			e.expectProbes(r, refused, "ksm_pages", "ksm_sleep", "thp", "uevent")
			checkHostFiles(t, files, before)
		}},
	{Group: Escape, Name: "write-proc-sys",
		Want: "writes to /proc/sys (core_pattern, modprobe, hostname, drop_caches) and /proc/sysrq-trigger fail, and the host's values stay as they were",
		Run: func(t *testing.T, e *Env) {
			files := []string{"/proc/sys/kernel/core_pattern", "/proc/sys/kernel/modprobe", "/proc/sys/kernel/hostname"}
			before := readHostFiles(files)
			sb := e.Sandbox(nil)
			r := e.Py(sb, `
def wr(p, v):
    with open(p, "w") as f:
        f.write(v)
tryop("core_pattern", lambda: wr("/proc/sys/kernel/core_pattern", "|/workspace/pwn"))
tryop("modprobe", lambda: wr("/proc/sys/kernel/modprobe", "/workspace/pwn"))
tryop("hostname", lambda: wr("/proc/sys/kernel/hostname", "pwned"))
tryop("drop_caches", lambda: wr("/proc/sys/vm/drop_caches", "3"))
tryop("sysrq", lambda: wr("/proc/sysrq-trigger", "h"))
`)
			requireRan(t, r)
			e.expectProbes(r, refused, "core_pattern", "modprobe", "hostname", "drop_caches", "sysrq")
			checkHostFiles(t, files, before)
		}},
	{Group: Escape, Name: "setuid-binaries",
		Want: "no_new_privs is set, and no setuid-root program of the image (su, mount, passwd) runs with uid 0",
		Run: func(t *testing.T, e *Env) {
			sb := e.Sandbox(nil)
			r := e.Py(sb, `
import subprocess
report("no_new_privs", str(sc("prctl", 39, 0, 0, 0, 0)[0]))
for name, argv in (("su", ["su", "-c", "id -u", "root"]), ("mount", ["mount", "-t", "tmpfs", "none", "/mnt"]),
                   ("passwd", ["passwd", "-S", "root"]), ("newgrp", ["newgrp", "root"])):
    try:
        p = subprocess.run(argv, capture_output=True, stdin=subprocess.DEVNULL, timeout=10)
        report(name, "ok" if p.returncode == 0 else "EPERM")
    except (OSError, subprocess.TimeoutExpired):
        report(name, "ENOENT")
`)
			requireRan(t, r)
			e.expectProbes(r, []string{"1"}, "no_new_privs")
			e.expectProbes(r, denied, "su", "mount", "passwd", "newgrp")
		}},
	{Group: Escape, Name: "device-nodes",
		Want: "device nodes cannot be made, the host's disks and loop devices are not there, and /dev holds no block device",
		Run: func(t *testing.T, e *Env) {
			sb := e.Sandbox(nil)
			r := e.Py(sb, `
import stat
report("mknod_mem", sc("mknodat", -100, b"/workspace/mem", stat.S_IFCHR | 0o666, os.makedev(1, 1))[1])
report("mknod_disk", sc("mknodat", -100, b"/tmp/sda", stat.S_IFBLK | 0o666, os.makedev(8, 0))[1])
for n in ("sda", "vda", "nvme0n1", "loop0", "loop-control", "mapper/control"):
    tryop("open_" + n.replace("/", "_"), lambda: os.close(os.open("/dev/" + n, os.O_RDONLY)))
blk = [n for n in os.listdir("/dev") if stat.S_ISBLK(os.lstat("/dev/" + n).st_mode)]
report("block_devices", ",".join(blk) or "none")
`)
			requireRan(t, r)
			e.expectProbes(r, denied, "mknod_mem", "mknod_disk")
			e.expectProbes(r, refused, "open_sda", "open_vda", "open_nvme0n1", "open_loop0", "open_loop-control", "open_mapper_control")
			e.expectProbes(r, []string{"none"}, "block_devices")
		}},
	{Group: Escape, Name: "chroot-escape",
		Want: "chroot(2) fails, so the classic chroot-and-climb escape cannot start; the host canary stays unreadable",
		Run: func(t *testing.T, e *Env) {
			sb := e.Sandbox(nil)
			p, _ := e.Canary()
			r := e.Py(sb, fmt.Sprintf(`
os.makedirs("/tmp/jail", exist_ok=True)
fd = os.open("/", os.O_RDONLY)
r = sc("chroot", b"/tmp/jail")
report("chroot", r[1])
if r[1] == "ok":
    os.fchdir(fd)
    for _ in range(64):
        os.chdir("..")
    sc("chroot", b".")
    try:
        print(open(%q).read())
    except OSError:
        pass
`, p))
			requireRan(t, r)
			e.NoCanary(r)
			e.expectProbes(r, []string{"EPERM", "EACCES"}, "chroot")
		}},
	{Group: Escape, Name: "keyctl",
		Want: "keyctl, add_key and request_key fail; on a backend with its own kernel they may work on that kernel's keyrings, never the host's",
		Run: func(t *testing.T, e *Env) {
			sb := e.Sandbox(nil)
			r := e.Py(sb, `
report("add_key", sc("add_key", b"user", b"airlock", b"secret", 6, -2)[1])
report("keyctl", sc("keyctl", 0, -3, 0)[1])
report("request_key", sc("request_key", b"user", b"airlock-nothing", None, -2)[1])
`)
			requireRan(t, r)
			allowed := denied
			if e.Caps().SeparateKernel {
				allowed = append([]string{"ok", "ENOKEY", "EKEYREVOKED"}, refused...)
			}
			e.expectProbes(r, allowed, "add_key", "keyctl", "request_key")
		}},
	{Group: Escape, Name: "bpf",
		Want: "bpf(2) cannot create maps or load programs",
		Run: func(t *testing.T, e *Env) {
			sb := e.Sandbox(nil)
			r := e.Py(sb, `
attr = ctypes.create_string_buffer(128)
ctypes.memmove(attr, (ctypes.c_uint32 * 4)(2, 4, 4, 1), 16)
report("map_create", sc("bpf", 0, attr, 128)[1])
insns = (ctypes.c_uint64 * 2)(0xb7, 0x95)
prog = ctypes.create_string_buffer(128)
ctypes.memmove(prog, (ctypes.c_uint32 * 2)(1, 2), 8)
ctypes.memmove(ctypes.byref(prog, 8), (ctypes.c_uint64 * 1)(ctypes.addressof(insns)), 8)
lic = ctypes.create_string_buffer(b"GPL")
ctypes.memmove(ctypes.byref(prog, 16), (ctypes.c_uint64 * 1)(ctypes.addressof(lic)), 8)
report("prog_load", sc("bpf", 5, prog, 128)[1])
`)
			requireRan(t, r)
			e.expectProbes(r, denied, "map_create", "prog_load")
		}},
	{Group: Escape, Name: "userfaultfd",
		Want: "userfaultfd(2) fails and /dev/userfaultfd cannot be opened",
		Run: func(t *testing.T, e *Env) {
			sb := e.Sandbox(nil)
			r := e.Py(sb, `
report("syscall", sc("userfaultfd", 0o2000000)[1])
tryop("dev", lambda: os.close(os.open("/dev/userfaultfd", os.O_RDWR)))
`)
			requireRan(t, r)
			e.expectProbes(r, denied, "syscall", "dev")
		}},
	{Group: Escape, Name: "perf-event-open",
		Want: "perf_event_open(2) fails, even for the program's own user-space counters",
		Run: func(t *testing.T, e *Env) {
			sb := e.Sandbox(nil)
			r := e.Py(sb, `
attr = ctypes.create_string_buffer(128)
ctypes.memmove(attr, (ctypes.c_uint32 * 2)(1, 128), 8)
flags = (1 << 5) | (1 << 6)
ctypes.memmove(ctypes.byref(attr, 40), (ctypes.c_uint64 * 1)(flags), 8)
report("sw_clock", sc("perf_event_open", attr, 0, -1, -1, 0)[1])
ctypes.memmove(attr, (ctypes.c_uint32 * 2)(0, 128), 8)
report("hw_cycles", sc("perf_event_open", attr, 0, -1, -1, 0)[1])
`)
			requireRan(t, r)
			e.expectProbes(r, append([]string{"ENODEV"}, denied...), "sw_clock", "hw_cycles")
		}},
	{Group: Escape, Name: "clock-change",
		Want: "clock_settime, settimeofday, clock_adjtime and date -s fail, and the host's clock does not move",
		Run: func(t *testing.T, e *Env) {
			sb := e.Sandbox(nil)
			start, mono := time.Now(), time.Now()
			r := e.Py(sb, `
import subprocess
ts = (ctypes.c_long * 2)(86400, 0)
report("clock_settime", sc("clock_settime", 0, ts)[1])
tv = (ctypes.c_long * 2)(86400, 0)
report("settimeofday", sc("settimeofday", tv, None)[1])
tx = ctypes.create_string_buffer(256)
ctypes.memmove(tx, (ctypes.c_uint32 * 1)(0x0001 | 0x0100), 4)
report("clock_adjtime", sc("clock_adjtime", 0, tx)[1])
p = subprocess.run(["date", "-s", "@86400"], capture_output=True)
report("date", "ok" if p.returncode == 0 else "EPERM")
`)
			requireRan(t, r)
			e.expectProbes(r, denied, "clock_settime", "settimeofday", "clock_adjtime", "date")
			// time.Since uses the monotonic clock: compare it with the wall clock.
			if drift := time.Now().Round(0).Sub(start.Round(0)) - time.Since(mono); drift > 2*time.Second || drift < -2*time.Second {
				t.Fatalf("the host's wall clock moved by %v during the case", drift)
			}
		}},
	{Group: Escape, Name: "io-uring",
		Want: "io_uring_setup(2) fails",
		Run: func(t *testing.T, e *Env) {
			sb := e.Sandbox(nil)
			r := e.Py(sb, `
params = ctypes.create_string_buffer(120)
report("setup", sc("io_uring_setup", 8, params)[1])
`)
			requireRan(t, r)
			e.expectProbes(r, denied, "setup")
		}},
	{Group: Escape, Name: "host-processes-invisible",
		Want: "/proc shows only the sandbox's own few processes: no host process, runsc, airlockd or test binary",
		Run: func(t *testing.T, e *Env) {
			sb := e.Sandbox(nil)
			self := filepath.Base(os.Args[0])
			r := e.Py(sb, `
pids = [p for p in os.listdir("/proc") if p.isdigit()]
cmds = []
for p in pids:
    try:
        cmds.append(open("/proc/%s/cmdline" % p, "rb").read().replace(b"\0", b" ").decode(errors="replace"))
    except OSError:
        pass
report("count", len(pids))
print("\n".join(cmds))
`)
			requireRan(t, r)
			got := probes(r.Stdout)
			var n int
			fmt.Sscan(got["count"], &n)
			if n == 0 || n > 6 {
				t.Errorf("the sandbox sees %d processes, want the agent and the probe (at most 6): %s", n, r)
			}
			for _, bad := range []string{self, "runsc", "airlockd", "systemd", "containerd", "sshd"} {
				if strings.Contains(r.Stdout, bad) {
					t.Errorf("the sandbox sees a host process (%s): %s", bad, r)
				}
			}
		}},
	{Group: Escape, Name: "host-network",
		Want: "the sandbox has only a loopback interface and cannot connect to a server on the host's loopback or its other addresses",
		Run: func(t *testing.T, e *Env) {
			ln, err := net.Listen("tcp", "0.0.0.0:0")
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			accepted := make(chan struct{}, 16)
			go func() {
				for {
					c, err := ln.Accept()
					if err != nil {
						return
					}
					c.Close()
					accepted <- struct{}{}
				}
			}()
			port := ln.Addr().(*net.TCPAddr).Port
			targets := []string{"127.0.0.1"}
			if ip := hostAddress(); ip != "" {
				targets = append(targets, ip)
			}
			sb := e.Sandbox(nil)
			var code strings.Builder
			code.WriteString("report(\"ifaces\", \",\".join(sorted(n for _, n in socket.if_nameindex())))\n")
			for i, ip := range targets {
				fmt.Fprintf(&code, `
s = socket.socket(); s.settimeout(3)
try:
    s.connect((%q, %d)); report("connect%d", "ok")
except socket.timeout:
    report("connect%d", "ETIMEDOUT")
except OSError as ex:
    report("connect%d", errname(ex))
`, ip, port, i, i, i)
			}
			r := e.Py(sb, code.String())
			requireRan(t, r)
			got := probes(r.Stdout)
			if got["ifaces"] != "lo" {
				t.Errorf("interfaces %q, want only lo", got["ifaces"])
			}
			for i := range targets {
				if v := got[fmt.Sprintf("connect%d", i)]; v == "ok" || v == "" {
					t.Errorf("connecting to the host's %s:%d: %q, want a failure", targets[i], port, v)
				}
			}
			select {
			case <-accepted:
				t.Errorf("the host's server accepted a connection from the sandbox")
			default:
			}
		}},
	{Group: Escape, Name: "kernel-log",
		Want: "syslog(2), /dev/kmsg and /proc/kmsg give nothing of the host kernel's log: they fail on a shared kernel; a separate kernel may show its own log, never the host's",
		Run: func(t *testing.T, e *Env) {
			sb := e.Sandbox(nil)
			r := e.Py(sb, `
buf = ctypes.create_string_buffer(1 << 16)
r = sc("syslog", 3, buf, 1 << 16)
report("syslog", r[1] if r[0] <= 0 else "read")
print(buf.raw[:max(r[0], 0)].decode(errors="replace"))
def rd(p):
    fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK)
    try:
        d = os.read(fd, 1 << 16)
    finally:
        os.close(fd)
    print(d.decode(errors="replace"))
    if d:
        raise OSError(errno.EEXIST, "read")
tryop("dev_kmsg", lambda: rd("/dev/kmsg"))
tryop("proc_kmsg", lambda: rd("/proc/kmsg"))
`)
			requireRan(t, r)
			allowed := append([]string{"ok", "EAGAIN"}, refused...)
			if e.Caps().SeparateKernel {
				allowed = append(allowed, "read", "EEXIST")
			}
			e.expectProbes(r, allowed, "syslog", "dev_kmsg", "proc_kmsg")
			var u unixUtsname
			if rel := hostUname(&u); rel != "" && strings.Contains(r.Stdout, rel) {
				t.Errorf("the sandbox read the host kernel's log (it names release %s)", rel)
			}
		}},
	{Group: Escape, Name: "kernel-identity", SeparateKernel: true,
		Want: "the kernel the sandbox sees is not the host's: uname's release and /proc/version differ from the host's, so an exploit cannot pick the host kernel's version",
		Run: func(t *testing.T, e *Env) {
			sb := e.Sandbox(nil)
			r := e.Sh(sb, "uname -r; cat /proc/version")
			var u unixUtsname
			hostRelease := hostUname(&u)
			if hostRelease != "" && strings.Contains(r.Stdout, hostRelease) {
				t.Fatalf("the sandbox sees the host kernel's release %q: %s", hostRelease, r)
			}
		}},
	{Group: Escape, Name: "host-memory-hidden", SeparateKernel: true,
		Want: "/proc/meminfo does not show the host's total memory",
		Run: func(t *testing.T, e *Env) {
			sb := e.Sandbox(nil)
			r := e.Sh(sb, "grep MemTotal /proc/meminfo")
			host := readHostFiles([]string{"/proc/meminfo"})["/proc/meminfo"]
			for _, line := range strings.Split(host, "\n") {
				if strings.HasPrefix(line, "MemTotal:") && strings.Contains(r.Stdout, strings.TrimSpace(strings.TrimPrefix(line, "MemTotal:"))) {
					t.Fatalf("the sandbox sees the host's memory: %s", r)
				}
			}
		}},
	{Group: Escape, Name: "host-boot-id-hidden", SeparateKernel: true,
		Want: "the sandbox's boot_id is not the host's, so sandboxes cannot tell they share a host",
		Run: func(t *testing.T, e *Env) {
			sb := e.Sandbox(nil)
			r := e.Sh(sb, "cat /proc/sys/kernel/random/boot_id")
			host := strings.TrimSpace(readHostFiles([]string{"/proc/sys/kernel/random/boot_id"})["/proc/sys/kernel/random/boot_id"])
			if host != "" && strings.Contains(r.Stdout, host) {
				t.Fatalf("the sandbox sees the host's boot_id: %s", r)
			}
		}},
}

// readHostFiles reads small host files (missing ones read as "").
func readHostFiles(paths []string) map[string]string {
	m := map[string]string{}
	for _, p := range paths {
		b, _ := os.ReadFile(p)
		m[p] = string(b)
	}
	return m
}

// checkHostFiles fails t if a host file changed, and puts it back.
func checkHostFiles(t *testing.T, paths []string, before map[string]string) {
	t.Helper()
	after := readHostFiles(paths)
	for _, p := range paths {
		if after[p] != before[p] {
			t.Errorf("the sandbox changed the host's %s: %q -> %q", p, before[p], after[p])
			os.WriteFile(p, []byte(strings.TrimSpace(before[p])), 0)
		}
	}
}

// hostAddress returns an IPv4 address of the host that is not loopback,
// or "".
func hostAddress() string {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return ""
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() && n.IP.To4() != nil {
			return n.IP.String()
		}
	}
	return ""
}
