// Package jailer confines a VMM process on the host before it runs, as
// Firecracker's jailer does: the host's own binary is started again with
// Arg as its first argument in new mount, PID, IPC, UTS and network
// namespaces (Command), the caller moves it into its cgroup, and it reads
// its Config from fd 3; then, in this order, it makes every mount private,
// bind-mounts the few host paths the VMM needs (its binary and libraries,
// read-only) into the chroot directory, mounts a /proc of its own PID
// namespace there, sets the hostname, chroots, drops every capability,
// changes to the VMM's unprivileged uid and gid, sets no_new_privs and
// execs the VMM with every descriptor past stdio closed but those its
// Config keeps (KeepFDs: a tap the caller opened). The VMM is then PID 1 of its namespace: when it exits,
// nothing of the jail is left running, and its mounts go with the mount
// namespace.
//
// cmd/airlockd, cmd/airlock (bench-backends) and tests that start
// machines call RunIfAsked first
// thing in main. The package owns nothing on the host but the process it
// starts; the caller makes the directory, the cgroup and the uid.
package jailer
