package conformance

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// syscalls are the numbers the Python prelude knows, for this
// architecture (the sandbox runs on the host's).
var syscalls = map[string]uintptr{
	"mount": unix.SYS_MOUNT, "umount2": unix.SYS_UMOUNT2, "unshare": unix.SYS_UNSHARE,
	"setns": unix.SYS_SETNS, "clone": unix.SYS_CLONE, "ptrace": unix.SYS_PTRACE,
	"process_vm_readv": unix.SYS_PROCESS_VM_READV, "init_module": unix.SYS_INIT_MODULE,
	"finit_module": unix.SYS_FINIT_MODULE, "delete_module": unix.SYS_DELETE_MODULE,
	"bpf": unix.SYS_BPF, "userfaultfd": unix.SYS_USERFAULTFD, "perf_event_open": unix.SYS_PERF_EVENT_OPEN,
	"keyctl": unix.SYS_KEYCTL, "add_key": unix.SYS_ADD_KEY, "request_key": unix.SYS_REQUEST_KEY,
	"clock_settime": unix.SYS_CLOCK_SETTIME, "settimeofday": unix.SYS_SETTIMEOFDAY,
	"clock_adjtime": unix.SYS_CLOCK_ADJTIME, "syslog": unix.SYS_SYSLOG,
	"io_uring_setup": unix.SYS_IO_URING_SETUP, "chroot": unix.SYS_CHROOT, "pivot_root": unix.SYS_PIVOT_ROOT,
	"kexec_load": unix.SYS_KEXEC_LOAD, "open_by_handle_at": unix.SYS_OPEN_BY_HANDLE_AT,
	"name_to_handle_at": unix.SYS_NAME_TO_HANDLE_AT, "mknodat": unix.SYS_MKNODAT, "prctl": unix.SYS_PRCTL,
	"swapon": unix.SYS_SWAPON, "setrlimit": unix.SYS_SETRLIMIT,
}

// preludeCode is put before every Python case: syscall by name through
// ctypes, and a line per probe result ("label=ok" or "label=ERRNO").
const preludeCode = `
import ctypes, errno, json, os, socket, sys, time
_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long
NR = json.loads(%q)
def _arg(x):
    if isinstance(x, int): return ctypes.c_long(x)
    return x
def sc(name, *args):
    ctypes.set_errno(0)
    r = _libc.syscall(ctypes.c_long(NR[name]), *[_arg(a) for a in args])
    e = ctypes.get_errno()
    return r, ("ok" if r != -1 else errno.errorcode.get(e, str(e)))
def report(label, res):
    print("%%s=%%s" %% (label, res), flush=True)
def errname(ex):
    return errno.errorcode.get(ex.errno, str(ex.errno))
def tryop(label, fn):
    try:
        fn()
        report(label, "ok")
    except OSError as ex:
        report(label, errname(ex))
`

func prelude() string {
	nr, _ := json.Marshal(syscalls)
	return strings.Replace(strings.Replace(preludeCode, "%q", "'"+string(nr)+"'", 1), "%%", "%", -1)
}

// probes parses "label=result" lines.
func probes(out string) map[string]string {
	m := map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		if k, v, ok := strings.Cut(line, "="); ok && k != "" && !strings.ContainsAny(k, " \t") {
			m[k] = v
		}
	}
	return m
}

// Errno sets the probes accept.
var (
	// refused: the kernel (host, sandbox or guest) said no.
	refused = []string{"EPERM", "EACCES", "ENOSYS", "EROFS", "EOPNOTSUPP", "ENOENT", "EINVAL", "EAFNOSUPPORT", "EPROTONOSUPPORT", "ESOCKTNOSUPPORT", "ENXIO", "ENODEV", "EBADF", "ENOTSUP"}
	// denied: refused for want of privilege, or not there at all.
	denied = []string{"EPERM", "EACCES", "ENOSYS", "EROFS", "ENOENT"}
)

// expectProbes checks that every label has a result in allowed, and that
// every label was reported.
func (e *Env) expectProbes(r Result, allowed []string, labels ...string) map[string]string {
	e.t.Helper()
	got := probes(r.Stdout)
	for _, l := range labels {
		v, ok := got[l]
		switch {
		case !ok:
			e.t.Errorf("probe %s reported nothing: %s", l, r)
		case !slices.Contains(allowed, v):
			e.t.Errorf("probe %s: got %s, want one of %v", l, v, allowed)
		}
	}
	return got
}

// requireRan fails the case when the program did not run to its end.
func requireRan(t *testing.T, r Result) {
	t.Helper()
	if r.Err != nil || r.Status.Code != 0 {
		t.Fatalf("the probe did not run to its end: %s", r)
	}
}
