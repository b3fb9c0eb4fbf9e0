//go:build linux && (amd64 || arm64)

package harden

import (
	"fmt"
	"sort"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The seccomp filter is an allow-list. It is written here by hand as a
// classic BPF program with x/sys/unix's SockFilter: it is small, has one
// shape, and needs no assembler library (none is in go.mod). What it does,
// in order:
//
//   - a syscall of another architecture (the i386 or x32 ABIs on amd64)
//     fails with EPERM;
//   - clone with any namespace flag fails with EPERM; clone3, whose flags
//     are in memory a filter cannot read, fails with ENOSYS so that the C
//     library falls back to clone;
//   - socket is allowed for AF_UNIX, AF_INET, AF_INET6 and AF_NETLINK only;
//   - personality is allowed only for the values programs use to query or
//     set the default (not, say, ADDR_NO_RANDOMIZE);
//   - every syscall in allowed (and the architecture's extras) is allowed;
//   - every other syscall this table knows of fails with EPERM, and one
//     newer than any it knows (numbered above lastKnown) with ENOSYS, so
//     that the C library falls back to an older call it does allow.
//
// Only the four special cases read arguments, so the kernel's per-syscall
// cache of constant results (Linux 5.11 and later) serves every other
// syscall without running the filter.

// allowed are the syscalls allowed on every architecture.
var allowed = []uintptr{
	unix.SYS_READ, unix.SYS_WRITE, unix.SYS_CLOSE, unix.SYS_FSTAT, unix.SYS_LSEEK,
	unix.SYS_MMAP, unix.SYS_MPROTECT, unix.SYS_MUNMAP, unix.SYS_BRK,
	unix.SYS_RT_SIGACTION, unix.SYS_RT_SIGPROCMASK, unix.SYS_RT_SIGRETURN, unix.SYS_IOCTL,
	unix.SYS_PREAD64, unix.SYS_PWRITE64, unix.SYS_READV, unix.SYS_WRITEV, unix.SYS_SCHED_YIELD,
	unix.SYS_MREMAP, unix.SYS_MSYNC, unix.SYS_MINCORE, unix.SYS_MADVISE,
	unix.SYS_SHMGET, unix.SYS_SHMAT, unix.SYS_SHMCTL, unix.SYS_SHMDT, unix.SYS_DUP, unix.SYS_DUP3,
	unix.SYS_NANOSLEEP, unix.SYS_GETITIMER, unix.SYS_SETITIMER, unix.SYS_GETPID, unix.SYS_SENDFILE,
	unix.SYS_CONNECT, unix.SYS_ACCEPT, unix.SYS_ACCEPT4, unix.SYS_SENDTO, unix.SYS_RECVFROM,
	unix.SYS_SENDMSG, unix.SYS_RECVMSG, unix.SYS_SENDMMSG, unix.SYS_RECVMMSG, unix.SYS_SHUTDOWN,
	unix.SYS_BIND, unix.SYS_LISTEN, unix.SYS_GETSOCKNAME, unix.SYS_GETPEERNAME, unix.SYS_SOCKETPAIR,
	unix.SYS_SETSOCKOPT, unix.SYS_GETSOCKOPT,
	unix.SYS_EXECVE, unix.SYS_EXECVEAT, unix.SYS_EXIT, unix.SYS_EXIT_GROUP, unix.SYS_WAIT4, unix.SYS_WAITID,
	unix.SYS_KILL, unix.SYS_TKILL, unix.SYS_TGKILL, unix.SYS_UNAME,
	unix.SYS_SEMGET, unix.SYS_SEMOP, unix.SYS_SEMCTL, unix.SYS_SEMTIMEDOP,
	unix.SYS_MSGGET, unix.SYS_MSGSND, unix.SYS_MSGRCV, unix.SYS_MSGCTL,
	unix.SYS_FCNTL, unix.SYS_FLOCK, unix.SYS_FSYNC, unix.SYS_FDATASYNC, unix.SYS_SYNC, unix.SYS_SYNCFS,
	unix.SYS_SYNC_FILE_RANGE, unix.SYS_TRUNCATE, unix.SYS_FTRUNCATE, unix.SYS_FALLOCATE,
	unix.SYS_GETCWD, unix.SYS_CHDIR, unix.SYS_FCHDIR, unix.SYS_FCHMOD, unix.SYS_FCHOWN, unix.SYS_UMASK,
	unix.SYS_GETTIMEOFDAY, unix.SYS_GETRLIMIT, unix.SYS_SETRLIMIT, unix.SYS_PRLIMIT64,
	unix.SYS_GETRUSAGE, unix.SYS_SYSINFO, unix.SYS_TIMES,
	unix.SYS_GETUID, unix.SYS_GETGID, unix.SYS_GETEUID, unix.SYS_GETEGID,
	unix.SYS_SETUID, unix.SYS_SETGID, unix.SYS_SETREUID, unix.SYS_SETREGID,
	unix.SYS_SETRESUID, unix.SYS_GETRESUID, unix.SYS_SETRESGID, unix.SYS_GETRESGID,
	unix.SYS_SETFSUID, unix.SYS_SETFSGID, unix.SYS_GETGROUPS, unix.SYS_SETGROUPS,
	unix.SYS_SETPGID, unix.SYS_GETPGID, unix.SYS_GETPPID, unix.SYS_SETSID, unix.SYS_GETSID,
	unix.SYS_CAPGET, unix.SYS_CAPSET, unix.SYS_PRCTL, unix.SYS_GETTID,
	unix.SYS_RT_SIGPENDING, unix.SYS_RT_SIGTIMEDWAIT, unix.SYS_RT_SIGQUEUEINFO,
	unix.SYS_RT_TGSIGQUEUEINFO, unix.SYS_RT_SIGSUSPEND, unix.SYS_SIGALTSTACK,
	unix.SYS_STATFS, unix.SYS_FSTATFS, unix.SYS_GETPRIORITY, unix.SYS_SETPRIORITY,
	unix.SYS_SCHED_SETPARAM, unix.SYS_SCHED_GETPARAM, unix.SYS_SCHED_SETSCHEDULER,
	unix.SYS_SCHED_GETSCHEDULER, unix.SYS_SCHED_GET_PRIORITY_MAX, unix.SYS_SCHED_GET_PRIORITY_MIN,
	unix.SYS_SCHED_RR_GET_INTERVAL, unix.SYS_SCHED_SETAFFINITY, unix.SYS_SCHED_GETAFFINITY,
	unix.SYS_SCHED_SETATTR, unix.SYS_SCHED_GETATTR, unix.SYS_GETCPU,
	unix.SYS_MLOCK, unix.SYS_MLOCK2, unix.SYS_MUNLOCK, unix.SYS_MLOCKALL, unix.SYS_MUNLOCKALL,
	unix.SYS_READAHEAD, unix.SYS_FADVISE64,
	unix.SYS_SETXATTR, unix.SYS_LSETXATTR, unix.SYS_FSETXATTR, unix.SYS_GETXATTR, unix.SYS_LGETXATTR,
	unix.SYS_FGETXATTR, unix.SYS_LISTXATTR, unix.SYS_LLISTXATTR, unix.SYS_FLISTXATTR,
	unix.SYS_REMOVEXATTR, unix.SYS_LREMOVEXATTR, unix.SYS_FREMOVEXATTR,
	unix.SYS_SETXATTRAT, unix.SYS_GETXATTRAT, unix.SYS_LISTXATTRAT, unix.SYS_REMOVEXATTRAT,
	unix.SYS_FUTEX, unix.SYS_FUTEX_WAITV, unix.SYS_FUTEX_WAKE, unix.SYS_FUTEX_WAIT, unix.SYS_FUTEX_REQUEUE,
	unix.SYS_SET_ROBUST_LIST, unix.SYS_GET_ROBUST_LIST, unix.SYS_SET_TID_ADDRESS, unix.SYS_RSEQ,
	unix.SYS_IO_SETUP, unix.SYS_IO_DESTROY, unix.SYS_IO_GETEVENTS, unix.SYS_IO_PGETEVENTS,
	unix.SYS_IO_SUBMIT, unix.SYS_IO_CANCEL,
	unix.SYS_REMAP_FILE_PAGES, unix.SYS_GETDENTS64, unix.SYS_RESTART_SYSCALL,
	unix.SYS_TIMER_CREATE, unix.SYS_TIMER_SETTIME, unix.SYS_TIMER_GETTIME, unix.SYS_TIMER_GETOVERRUN,
	unix.SYS_TIMER_DELETE, unix.SYS_CLOCK_GETTIME, unix.SYS_CLOCK_GETRES, unix.SYS_CLOCK_NANOSLEEP,
	unix.SYS_TIMERFD_CREATE, unix.SYS_TIMERFD_SETTIME, unix.SYS_TIMERFD_GETTIME,
	unix.SYS_EPOLL_CREATE1, unix.SYS_EPOLL_CTL, unix.SYS_EPOLL_PWAIT, unix.SYS_EPOLL_PWAIT2,
	unix.SYS_EVENTFD2, unix.SYS_SIGNALFD4, unix.SYS_PIPE2,
	unix.SYS_INOTIFY_INIT1, unix.SYS_INOTIFY_ADD_WATCH, unix.SYS_INOTIFY_RM_WATCH,
	unix.SYS_MBIND, unix.SYS_SET_MEMPOLICY, unix.SYS_GET_MEMPOLICY, unix.SYS_SET_MEMPOLICY_HOME_NODE,
	unix.SYS_MQ_OPEN, unix.SYS_MQ_UNLINK, unix.SYS_MQ_TIMEDSEND, unix.SYS_MQ_TIMEDRECEIVE,
	unix.SYS_MQ_NOTIFY, unix.SYS_MQ_GETSETATTR,
	unix.SYS_IOPRIO_SET, unix.SYS_IOPRIO_GET,
	unix.SYS_OPENAT, unix.SYS_OPENAT2, unix.SYS_MKDIRAT, unix.SYS_MKNODAT, unix.SYS_FCHOWNAT,
	unix.SYS_NEWFSTATAT, unix.SYS_STATX, unix.SYS_UNLINKAT, unix.SYS_RENAMEAT, unix.SYS_RENAMEAT2,
	unix.SYS_LINKAT, unix.SYS_SYMLINKAT, unix.SYS_READLINKAT, unix.SYS_FCHMODAT, unix.SYS_FCHMODAT2,
	unix.SYS_FACCESSAT, unix.SYS_FACCESSAT2, unix.SYS_UTIMENSAT,
	unix.SYS_PSELECT6, unix.SYS_PPOLL,
	unix.SYS_SPLICE, unix.SYS_TEE, unix.SYS_VMSPLICE, unix.SYS_COPY_FILE_RANGE,
	unix.SYS_PREADV, unix.SYS_PWRITEV, unix.SYS_PREADV2, unix.SYS_PWRITEV2,
	unix.SYS_SECCOMP, unix.SYS_GETRANDOM, unix.SYS_MEMFD_CREATE, unix.SYS_MEMBARRIER,
	unix.SYS_PKEY_MPROTECT, unix.SYS_PKEY_ALLOC, unix.SYS_PKEY_FREE,
	unix.SYS_PIDFD_OPEN, unix.SYS_PIDFD_SEND_SIGNAL, unix.SYS_CLOSE_RANGE,
	unix.SYS_LANDLOCK_CREATE_RULESET, unix.SYS_LANDLOCK_ADD_RULE, unix.SYS_LANDLOCK_RESTRICT_SELF,
	unix.SYS_CACHESTAT, unix.SYS_MAP_SHADOW_STACK, unix.SYS_MSEAL,
}

// denied are syscalls refused with EPERM on every architecture. They are
// listed, though the filter refuses whatever it does not allow, so the
// table says what it knows and tests can check each one.
var denied = []uintptr{
	unix.SYS_PTRACE, unix.SYS_PROCESS_VM_READV, unix.SYS_PROCESS_VM_WRITEV, unix.SYS_KCMP,
	unix.SYS_PIDFD_GETFD, unix.SYS_PROCESS_MADVISE, unix.SYS_PROCESS_MRELEASE,
	unix.SYS_MOUNT, unix.SYS_UMOUNT2, unix.SYS_PIVOT_ROOT, unix.SYS_CHROOT,
	unix.SYS_OPEN_TREE, unix.SYS_OPEN_TREE_ATTR, unix.SYS_MOVE_MOUNT, unix.SYS_FSOPEN,
	unix.SYS_FSCONFIG, unix.SYS_FSMOUNT, unix.SYS_FSPICK, unix.SYS_MOUNT_SETATTR,
	unix.SYS_STATMOUNT, unix.SYS_LISTMOUNT,
	unix.SYS_UNSHARE, unix.SYS_SETNS,
	unix.SYS_INIT_MODULE, unix.SYS_FINIT_MODULE, unix.SYS_DELETE_MODULE,
	unix.SYS_KEXEC_LOAD, unix.SYS_KEXEC_FILE_LOAD, unix.SYS_REBOOT,
	unix.SYS_SWAPON, unix.SYS_SWAPOFF, unix.SYS_ACCT, unix.SYS_QUOTACTL, unix.SYS_QUOTACTL_FD,
	unix.SYS_NFSSERVCTL, unix.SYS_LOOKUP_DCOOKIE, unix.SYS_VHANGUP, unix.SYS_SYSLOG,
	unix.SYS_SETTIMEOFDAY, unix.SYS_CLOCK_SETTIME, unix.SYS_CLOCK_ADJTIME, unix.SYS_ADJTIMEX,
	unix.SYS_SETHOSTNAME, unix.SYS_SETDOMAINNAME,
	unix.SYS_ADD_KEY, unix.SYS_REQUEST_KEY, unix.SYS_KEYCTL,
	unix.SYS_BPF, unix.SYS_PERF_EVENT_OPEN, unix.SYS_USERFAULTFD,
	unix.SYS_FANOTIFY_INIT, unix.SYS_FANOTIFY_MARK,
	unix.SYS_NAME_TO_HANDLE_AT, unix.SYS_OPEN_BY_HANDLE_AT,
	unix.SYS_IO_URING_SETUP, unix.SYS_IO_URING_ENTER, unix.SYS_IO_URING_REGISTER,
	unix.SYS_MIGRATE_PAGES, unix.SYS_MOVE_PAGES, unix.SYS_MEMFD_SECRET,
	unix.SYS_LSM_GET_SELF_ATTR, unix.SYS_LSM_SET_SELF_ATTR, unix.SYS_LSM_LIST_MODULES,
}

// Namespace flags clone must not carry. (CLONE_NEWTIME shares its bit
// with the exit signal in clone's flags and is only accepted by clone3
// and unshare, both of which are refused.)
const cloneNamespaceFlags = unix.CLONE_NEWNS | unix.CLONE_NEWUTS | unix.CLONE_NEWIPC |
	unix.CLONE_NEWUSER | unix.CLONE_NEWPID | unix.CLONE_NEWNET | unix.CLONE_NEWCGROUP

// socketFamilies are the address families socket(2) may create.
var socketFamilies = []uint32{unix.AF_UNIX, unix.AF_INET, unix.AF_INET6, unix.AF_NETLINK}

// personalities are the personality(2) arguments allowed: query, the
// default, and the 32-bit and UNAME26 variants some programs ask for.
var personalities = []uint32{0x0, 0x8, 0x20000, 0x20008, 0xffffffff}

// Offsets in struct seccomp_data.
const (
	offNr   = 0
	offArch = 4
	offArg0 = 16 // low 32 bits of args[0] on a little-endian machine
)

func stmt(code uint16, k uint32) unix.SockFilter { return unix.SockFilter{Code: code, K: k} }

func jump(code uint16, k uint32, jt, jf uint8) unix.SockFilter {
	return unix.SockFilter{Code: code, Jt: jt, Jf: jf, K: k}
}

const (
	opLoad = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
	opJeq  = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
	opJge  = unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K
	opJgt  = unix.BPF_JMP | unix.BPF_JGT | unix.BPF_K
	opJset = unix.BPF_JMP | unix.BPF_JSET | unix.BPF_K
	opJa   = unix.BPF_JMP | unix.BPF_JA
	opRet  = unix.BPF_RET | unix.BPF_K
)

var (
	retAllow  = stmt(opRet, unix.SECCOMP_RET_ALLOW)
	retEPERM  = stmt(opRet, unix.SECCOMP_RET_ERRNO|uint32(unix.EPERM))
	retENOSYS = stmt(opRet, unix.SECCOMP_RET_ERRNO|uint32(unix.ENOSYS))
)

// AllowedSyscalls returns the syscall numbers the filter allows without
// looking at arguments, sorted.
func AllowedSyscalls() []uintptr {
	return sortedUnique(append(append([]uintptr{}, allowed...), archAllowed...))
}

// DeniedSyscalls returns the syscall numbers the filter knows and refuses
// with EPERM, sorted.
func DeniedSyscalls() []uintptr {
	return sortedUnique(append(append([]uintptr{}, denied...), archDenied...))
}

func sortedUnique(xs []uintptr) []uintptr {
	sort.Slice(xs, func(i, j int) bool { return xs[i] < xs[j] })
	out := xs[:0]
	for i, x := range xs {
		if i == 0 || x != xs[i-1] {
			out = append(out, x)
		}
	}
	return out
}

// lastKnown is the highest syscall number the tables name.
func lastKnown() uint32 {
	var max uintptr
	for _, list := range [][]uintptr{allowed, archAllowed, denied, archDenied, {unix.SYS_CLONE, unix.SYS_CLONE3, unix.SYS_SOCKET, unix.SYS_PERSONALITY}} {
		for _, n := range list {
			if n > max {
				max = n
			}
		}
	}
	return uint32(max)
}

// Filter returns the seccomp program.
func Filter() []unix.SockFilter {
	p := []unix.SockFilter{
		stmt(opLoad, offArch),
		jump(opJeq, auditArch, 1, 0),
		retEPERM,
		stmt(opLoad, offNr),
	}
	if x32Bit != 0 {
		p = append(p, jump(opJge, x32Bit, 0, 1), retEPERM)
	}
	// clone: no namespace flags.
	p = append(p,
		jump(opJeq, uint32(unix.SYS_CLONE), 0, 4),
		stmt(opLoad, offArg0),
		jump(opJset, cloneNamespaceFlags, 0, 1),
		retEPERM,
		retAllow,
	)
	// clone3: ENOSYS, so that callers fall back to clone.
	p = append(p, jump(opJeq, uint32(unix.SYS_CLONE3), 0, 1), retENOSYS)
	p = append(p, argIn(unix.SYS_SOCKET, socketFamilies)...)
	p = append(p, argIn(unix.SYS_PERSONALITY, personalities)...)
	// The allow-list, in chunks whose jumps fit in 8 bits: a match jumps
	// to the chunk's ALLOW, the end of a chunk jumps over it.
	list := AllowedSyscalls()
	for len(list) > 0 {
		n := min(len(list), 200)
		for i, nr := range list[:n] {
			p = append(p, jump(opJeq, uint32(nr), uint8(n-i), 0))
		}
		p = append(p, jump(opJa, 0, 0, 0), retAllow)
		p[len(p)-2].K = 1
		list = list[n:]
	}
	return append(p,
		jump(opJgt, lastKnown(), 0, 1),
		retENOSYS,
		retEPERM,
	)
}

// argIn allows syscall nr only when its first argument is one of vals,
// and refuses it with EPERM otherwise. The accumulator holds nr on entry
// and still does when nr did not match.
func argIn(nr uintptr, vals []uint32) []unix.SockFilter {
	n := len(vals)
	p := []unix.SockFilter{
		jump(opJeq, uint32(nr), 0, uint8(n+3)),
		stmt(opLoad, offArg0),
	}
	for i, v := range vals {
		p = append(p, jump(opJeq, v, uint8(n-i), 0))
	}
	return append(p, retEPERM, retAllow)
}

// installSeccomp installs the filter on the calling thread, the one that
// execs (no_new_privs must be set on it).
// InstallSeccomp installs the sandbox's seccomp allow-list on the calling
// thread (and what it execs). no_new_privs must be set first.
func InstallSeccomp() error {
	f := Filter()
	if len(f) > 4096 {
		return fmt.Errorf("seccomp filter too long: %d instructions", len(f))
	}
	prog := unix.SockFprog{Len: uint16(len(f)), Filter: &f[0]}
	_, _, errno := unix.RawSyscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, 0, uintptr(unsafe.Pointer(&prog)))
	if errno != 0 {
		return fmt.Errorf("seccomp: %w", errno)
	}
	return nil
}
