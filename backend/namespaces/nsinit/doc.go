// Package nsinit is the init stage of the namespaces backend: the code
// that runs as the first process of a new sandbox, inside its new user,
// PID, mount, network, IPC, UTS and (after it is placed in its cgroup)
// cgroup namespaces, and turns that process into the confined agent.
//
// The host starts the image's own agent binary with InitArg as its first
// argument (cmd/airlock-agent calls RunIfAsked first thing); the binary
// is static, small, and the one the sandbox runs anyway, so no second
// program has to be installed or kept in step. The init stage reads its
// Config from fd 3, then, in this order: joins a new cgroup namespace;
// bind-mounts the image read-only as the new root with /proc, a minimal
// /dev, /dev/shm, /dev/pts, and the host-made /workspace and /tmp;
// masks the /proc files that describe the host; sets the hostname and
// brings loopback up; pivot_root()s into the new root and detaches the
// old one; sets the resource limits; drops to the sandbox user; clears
// every capability set; sets no_new_privs; applies Landlock where the
// kernel offers it; installs the seccomp-bpf allow-list; and execs the
// agent inside the new root. It reports a failure (or success) on fd 4,
// which closes on exec.
//
// It runs inside the sandbox, before any untrusted code: it must not
// import host-side packages, and everything it needs comes from Config.
package nsinit
