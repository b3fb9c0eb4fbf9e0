package namespaces_test

import "golang.org/x/sys/unix"

const (
	sysClone3   = unix.SYS_CLONE3
	sysGetpid   = unix.SYS_GETPID
	lastSyscall = unix.SYS_OPEN_TREE_ATTR
)
