//go:build linux

package harden

import "golang.org/x/sys/unix"

const auditArch = unix.AUDIT_ARCH_X86_64

// x32Bit marks syscalls of the x32 ABI, which share the x86-64 audit
// architecture; they are refused.
const x32Bit = 0x40000000

// archAllowed are the x86-64 syscalls that newer architectures replaced
// with the *at and generic forms, which C libraries and static binaries
// still call here.
var archAllowed = []uintptr{
	unix.SYS_OPEN, unix.SYS_CREAT, unix.SYS_STAT, unix.SYS_LSTAT, unix.SYS_ACCESS,
	unix.SYS_POLL, unix.SYS_SELECT, unix.SYS_PIPE, unix.SYS_DUP2, unix.SYS_PAUSE, unix.SYS_ALARM,
	unix.SYS_FORK, unix.SYS_VFORK, unix.SYS_GETDENTS, unix.SYS_RENAME, unix.SYS_MKDIR, unix.SYS_RMDIR,
	unix.SYS_LINK, unix.SYS_UNLINK, unix.SYS_SYMLINK, unix.SYS_READLINK, unix.SYS_CHMOD, unix.SYS_CHOWN,
	unix.SYS_LCHOWN, unix.SYS_UTIME, unix.SYS_UTIMES, unix.SYS_FUTIMESAT, unix.SYS_MKNOD,
	unix.SYS_ARCH_PRCTL, unix.SYS_GETPGRP, unix.SYS_TIME, unix.SYS_EPOLL_CREATE, unix.SYS_EPOLL_WAIT,
	unix.SYS_INOTIFY_INIT, unix.SYS_SIGNALFD, unix.SYS_EVENTFD,
	unix.SYS_SET_THREAD_AREA, unix.SYS_GET_THREAD_AREA,
}

// archDenied are x86-64 syscalls refused with EPERM. (uretprobe is not
// among them: Linux lets it past seccomp, as only the kernel's own
// uprobe trampoline may make it, and kills any other caller with
// SIGILL.)
var archDenied = []uintptr{
	unix.SYS_USELIB, unix.SYS_USTAT, unix.SYS_SYSFS, unix.SYS_MODIFY_LDT, unix.SYS__SYSCTL,
	unix.SYS_IOPL, unix.SYS_IOPERM, unix.SYS_CREATE_MODULE, unix.SYS_GET_KERNEL_SYMS,
	unix.SYS_QUERY_MODULE, unix.SYS_GETPMSG, unix.SYS_PUTPMSG, unix.SYS_AFS_SYSCALL,
	unix.SYS_TUXCALL, unix.SYS_SECURITY, unix.SYS_EPOLL_CTL_OLD, unix.SYS_EPOLL_WAIT_OLD,
	unix.SYS_VSERVER,
}
