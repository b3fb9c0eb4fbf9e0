//go:build linux && (amd64 || arm64)

package harden

import (
	"encoding/binary"
	"testing"

	"golang.org/x/sys/unix"
)

// evalFilter interprets the filter for one syscall: the few classic BPF
// instructions it uses, with the kernel's rules (jumps are relative to
// the next instruction; falling off the end or a bad load is an error).
func evalFilter(t *testing.T, prog []unix.SockFilter, arch uint32, nr uint32, arg0 uint64) uint32 {
	t.Helper()
	data := make([]byte, 64)
	binary.LittleEndian.PutUint32(data[0:], nr)
	binary.LittleEndian.PutUint32(data[4:], arch)
	binary.LittleEndian.PutUint64(data[16:], arg0)
	var a uint32
	for pc := 0; pc < len(prog); pc++ {
		in := prog[pc]
		switch in.Code {
		case opLoad:
			if int(in.K)+4 > len(data) || in.K%4 != 0 {
				t.Fatalf("pc %d: bad load offset %d", pc, in.K)
			}
			a = binary.LittleEndian.Uint32(data[in.K:])
		case opJeq, opJge, opJgt, opJset:
			var ok bool
			switch in.Code {
			case opJeq:
				ok = a == in.K
			case opJge:
				ok = a >= in.K
			case opJgt:
				ok = a > in.K
			case opJset:
				ok = a&in.K != 0
			}
			if ok {
				pc += int(in.Jt)
			} else {
				pc += int(in.Jf)
			}
		case opJa:
			pc += int(in.K)
		case opRet:
			return in.K
		default:
			t.Fatalf("pc %d: unexpected instruction %#x", pc, in.Code)
		}
		if pc+1 > len(prog) {
			t.Fatalf("pc %d: jumped past the end", pc)
		}
	}
	t.Fatalf("fell off the end of the filter")
	return 0
}

const (
	allow  = unix.SECCOMP_RET_ALLOW
	eperm  = unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)
	enosys = unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS)
)

func TestFilter(t *testing.T) {
	prog := Filter()
	if len(prog) > 4096 {
		t.Fatalf("%d instructions, the kernel takes 4096", len(prog))
	}
	for _, nr := range AllowedSyscalls() {
		if got := evalFilter(t, prog, auditArch, uint32(nr), 0); got != allow {
			t.Errorf("allowed syscall %d: %#x", nr, got)
		}
	}
	for _, nr := range DeniedSyscalls() {
		if got := evalFilter(t, prog, auditArch, uint32(nr), 0); got != eperm {
			t.Errorf("denied syscall %d: %#x, want EPERM", nr, got)
		}
	}
	last := lastKnown()
	for nr := uint32(0); nr < last+100; nr++ {
		got := evalFilter(t, prog, auditArch, nr, 0)
		switch {
		case nr > last && got != enosys:
			t.Errorf("unknown syscall %d (after the last known, %d): %#x, want ENOSYS", nr, last, got)
		case got != allow && got != eperm && got != enosys:
			t.Errorf("syscall %d: unexpected result %#x", nr, got)
		}
	}
	tests := []struct {
		name string
		arch uint32
		nr   uintptr
		arg0 uint64
		want uint32
	}{
		{"other architecture", unix.AUDIT_ARCH_I386, unix.SYS_GETPID, 0, eperm},
		{"thread clone", auditArch, unix.SYS_CLONE, unix.CLONE_VM | unix.CLONE_FS | unix.CLONE_FILES | unix.CLONE_SIGHAND | unix.CLONE_THREAD | unix.CLONE_SYSVSEM, allow},
		{"fork-like clone", auditArch, unix.SYS_CLONE, uint64(unix.SIGCHLD), allow},
		{"vfork clone with pidfd", auditArch, unix.SYS_CLONE, unix.CLONE_VM | unix.CLONE_VFORK | unix.CLONE_PIDFD | uint64(unix.SIGCHLD), allow},
		{"clone into a user namespace", auditArch, unix.SYS_CLONE, unix.CLONE_NEWUSER | uint64(unix.SIGCHLD), eperm},
		{"clone into a network namespace", auditArch, unix.SYS_CLONE, unix.CLONE_NEWNET, eperm},
		{"clone3", auditArch, unix.SYS_CLONE3, 0, enosys},
		{"unix socket", auditArch, unix.SYS_SOCKET, unix.AF_UNIX, allow},
		{"inet socket", auditArch, unix.SYS_SOCKET, unix.AF_INET, allow},
		{"inet6 socket", auditArch, unix.SYS_SOCKET, unix.AF_INET6, allow},
		{"netlink socket", auditArch, unix.SYS_SOCKET, unix.AF_NETLINK, allow},
		{"packet socket", auditArch, unix.SYS_SOCKET, unix.AF_PACKET, eperm},
		{"vsock", auditArch, unix.SYS_SOCKET, unix.AF_VSOCK, eperm},
		{"kernel crypto socket", auditArch, unix.SYS_SOCKET, unix.AF_ALG, eperm},
		{"personality query", auditArch, unix.SYS_PERSONALITY, 0xffffffff, allow},
		{"personality linux", auditArch, unix.SYS_PERSONALITY, 0, allow},
		{"personality no ASLR", auditArch, unix.SYS_PERSONALITY, 0x0040000, eperm},
	}
	if x32Bit != 0 {
		tests = append(tests, struct {
			name string
			arch uint32
			nr   uintptr
			arg0 uint64
			want uint32
		}{"x32 ABI", auditArch, x32Bit | unix.SYS_GETPID, 0, eperm})
	}
	for _, tt := range tests {
		if got := evalFilter(t, prog, tt.arch, uint32(tt.nr), tt.arg0); got != tt.want {
			t.Errorf("%s: %#x, want %#x", tt.name, got, tt.want)
		}
	}
}

// No syscall is both allowed and denied, and the special cases are in
// neither list.
func TestFilterTables(t *testing.T) {
	allowed := map[uintptr]bool{}
	for _, nr := range AllowedSyscalls() {
		allowed[nr] = true
	}
	for _, nr := range DeniedSyscalls() {
		if allowed[nr] {
			t.Errorf("syscall %d is both allowed and denied", nr)
		}
	}
	for _, nr := range []uintptr{unix.SYS_CLONE, unix.SYS_CLONE3, unix.SYS_SOCKET, unix.SYS_PERSONALITY} {
		if allowed[nr] {
			t.Errorf("syscall %d is special-cased but also allowed outright", nr)
		}
	}
}
