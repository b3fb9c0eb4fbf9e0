// Package namespaces is the hardened-container backend: each sandbox is
// a process tree in new user, PID, mount, network, IPC, UTS and cgroup
// namespaces on the host's own kernel, with the image's read-only root
// file system pivot_root()ed into place, a size-capped writable /workspace
// and /tmp on a loop-mounted ext4 disk (package loopdisk, shared with the
// gVisor backend), a minimal /dev, no capabilities, no_new_privs, Landlock
// where the kernel offers it, and a seccomp-bpf allow-list (denied
// syscalls fail with EPERM). Limits are a host cgroup (v1 or v2) per
// sandbox: memory, CPU and tasks, with RLIMIT_NPROC and RLIMIT_NOFILE.
//
// It shares the host kernel with the code it runs, so its Capabilities
// say SeparateKernel: false, its isolation level is "container", and the
// domain's policy gives it only to first-party tenants (see
// airlock.ChooseBackend). In exchange a sandbox starts in milliseconds.
//
// How a sandbox starts. The init stage is the image's own agent binary
// run with nsinit.InitArg (package nsinit): static, small, and the binary
// the sandbox runs anyway, so nothing else has to be installed or kept in
// step. The host starts it with clone flags for every namespace and a user
// namespace that maps only the sandbox user, uid 1000, to a host uid of
// its own from Config.UIDBase (host root is mapped to nothing; the init
// stage keeps the few capabilities it needs as ambient ones, and drops
// them all before the agent runs). It then waits, blocked on its config
// pipe. When a request comes, the host gives it a disk, a cgroup and
// limits and sends its nsinit.Config; the init stage moves itself into the
// cgroup (on v1, a thread moving itself skips the global lock a process
// move takes; on v2 the host moves it), builds the root, drops to the
// sandbox user and execs the agent as PID 1, which speaks the agent
// protocol over its stdin and stdout exactly as under gVisor.
//
// Work kept off a request's path: a few init stages are started ahead of
// time per image (Config.Prestart), a few disks are formatted and mounted
// ahead of time per size (Config.ReadyDisks), and a destroyed sandbox's
// disk image is deleted in the background once it is unmounted. Neither
// kind of ready resource is ever given to two sandboxes. The state
// directory is a shared bind mount of itself, so that a disk mounted
// after an init stage started reaches that stage's copy of the mounts.
//
// Volumes (volumes.go): a volume the node mounted is given to the
// sandbox as an idmapped mount through the sandbox's own user namespace,
// made in its run directory and bound by the init stage at the path
// asked for, so the volume's files (uid 1000 on its disk) are the
// sandbox user's inside.
//
// Destroy returns once nothing of the sandbox runs, is mounted or is in a
// cgroup; Close, CheckClean and Reconcile wait for or finish the deletes.
// A crashed server's sandboxes end by themselves (their agents read EOF
// when the server's pipes close) and Reconcile removes what is left.
//
// The package owns its state directory, the cgroups under its parent and
// the host uids of its range; it must not touch anything else on the host.
package namespaces
