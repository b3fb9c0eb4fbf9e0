// Package conformance is the one suite every backend passes: hostile
// programs, each with the result it must give, run in real sandboxes of
// the backend under test. A backend's tests call Run:
//
//	func TestConformance(t *testing.T) {
//		b := testenv.Namespaces(t)
//		conformance.Run(t, b, conformance.Options{Image: testenv.Image(t, "base"), ...})
//	}
//
// After every case all its sandboxes are destroyed and the host is
// checked: no process (descendant of the test or in the backend's cgroup
// parent), mount or run directory (below Options.WatchDirs), cgroup,
// network namespace of the case's sandboxes, or anything the backend's
// own CheckClean (the Checker interface) finds may be left. Processes a
// backend keeps ready on purpose are left out (the Keeper interface).
//
// Cases marked separate-kernel can only be passed when the sandbox does
// not share the host's kernel (gVisor, a microVM); a backend whose
// Capabilities say SeparateKernel: false skips them and says why. The
// cases and what each must give:
//
// Escape and probing:
//   - host-file-via-proc-root: a host canary file is unreadable through
//     its path, /proc/1/root, /proc/self/root, /proc/*/root and
//     /proc/*/cwd.
//   - dotdot-from-cwd: .. from /proc/self/cwd ends at the sandbox's root.
//   - dotdot-through-mounts: .. from every mount point inside leads back
//     to the sandbox's root; no host run directory is visible.
//   - proc-kcore: /proc/kcore is absent, unreadable or empty; kallsyms
//     shows no addresses.
//   - dev-mem: /dev/mem, /dev/kmem, /dev/port cannot be opened.
//   - mount: mount(2), umount2(2), pivot_root(2) and mount(8) fail.
//   - unshare-and-clone-namespaces: unshare(2) and clone(2) with namespace
//     flags fail with EPERM (on a separate kernel they may work inside it;
//     the canary stays unreadable).
//   - setns: setns(2) into the agent's or its own namespaces fails.
//   - ptrace-agent: ptrace attach/seize and process_vm_readv of the agent,
//     and its /proc/1/mem, environ and protocol descriptors, fail.
//   - signal-agent: no catchable signal to PID 1, nor kill -1, ends or
//     stops the agent.
//   - kill-or-stop-agent: SIGKILL or SIGSTOP to PID 1 stays inside: the
//     agent survives (Linux) or only its sandbox ends; Destroy cleans up
//     within 15 s.
//   - kernel-module: init_module, finit_module, delete_module fail.
//   - raw-and-packet-sockets: raw IPv4/IPv6 and packet sockets fail.
//   - write-sys: writes to /sys fail; the host's values do not change.
//   - write-proc-sys: writes to core_pattern, modprobe, hostname,
//     drop_caches and sysrq-trigger fail; the host's values do not change.
//   - setuid-binaries: no_new_privs is set; su, mount, passwd and newgrp
//     never run as root.
//   - device-nodes: mknod of devices fails; no host disk, loop or mapper
//     device is there; /dev has no block device.
//   - chroot-escape: chroot(2) fails, so the chroot-and-climb escape
//     cannot start.
//   - keyctl: keyctl, add_key and request_key fail (on a separate kernel
//     they may work on its own keyrings).
//   - bpf: bpf(2) can neither create maps nor load programs.
//   - userfaultfd: the syscall and /dev/userfaultfd fail.
//   - perf-event-open: fails, even for the program's own counters.
//   - clock-change: clock_settime, settimeofday, clock_adjtime and
//     date -s fail; the host's clock does not move.
//   - io-uring: io_uring_setup(2) fails.
//   - host-processes-invisible: /proc shows only the sandbox's few
//     processes.
//   - host-network: only a loopback interface; a server on the host's
//     loopback or other addresses cannot be reached.
//   - kernel-log: syslog(2), /dev/kmsg and /proc/kmsg give nothing of the
//     host kernel's log.
//   - kernel-identity (separate-kernel): uname's release differs from the
//     host kernel's.
//   - host-memory-hidden (separate-kernel): /proc/meminfo does not show
//     the host's memory.
//   - host-boot-id-hidden (separate-kernel): boot_id is not the host's.
//
// Exhaustion:
//   - fork-bomb: a fork bomb under 64 processes ends at its 5 s deadline,
//     the sandbox's host tasks stay bounded, and a new sandbox still runs.
//   - fork-limit: fork past 32 processes fails with EAGAIN.
//   - memory-bomb: 1 GiB touched under 256 MiB is OOM-killed (137 or the
//     sandbox ends) and Stats says OOMKilled.
//   - disk-fill: 64 MB into a 32 MB workspace fails with ENOSPC.
//   - inode-fill: empty files in a 16 MB workspace fail with ENOSPC
//     before 5000.
//   - fd-storm: open stops with EMFILE by 4096; raising the limit fails.
//   - huge-argv-and-env: an exec request over the protocol's cap is not
//     sent; 8 MiB argv or environment fails inside (E2BIG); 200 KiB pass.
//   - endless-output: endless stdout and stderr end at the 2 s deadline;
//     the host reads them as they stream; the agent survives.
//   - sleep-past-deadline: killed at 1 s: timed out, exit 137.
//   - ignores-sigterm: survives SIGTERM, SIGINT, SIGHUP, killed at the
//     deadline, nothing of it left.
//   - daemon-outlives-parent: a double-forked daemon lets its exec return;
//     Stop ends it (its file stops changing).
//
// Leaks between sandboxes (two at once, or one after another):
//   - processes: neither sees the other's processes; killing all it can
//     leaves the other's program running.
//   - files: files in /workspace, /tmp, /dev/shm of one are absent in the
//     other.
//   - network: TCP, UDP and abstract unix sockets of one cannot be
//     reached from the other.
//   - shared-memory-and-ipc: System V shm, message queues, semaphores and
//     POSIX shared memory of one do not exist in the other.
//   - next-sandbox-is-fresh: what a destroyed sandbox left is absent from
//     the next, whose workspace is empty.
//
// Artifacts and files:
//   - symlinks-to-host: links to host paths stay links; the agent refuses
//     them; a careful host reader finds no host file among the regular
//     files; the canary never comes back.
//   - hard-links: a hard link out of the workspace cannot be made (its own
//     file system); the agent refuses hard-linked files.
//   - odd-names: newlines, tabs, dashes, dots, non-ASCII, 255-byte names
//     and paths past PATH_MAX come back exactly, beneath the workspace.
//   - dotdot-and-absolute-paths: file requests with .. or paths outside
//     /workspace and /tmp are refused and touch nothing.
//   - fifo-and-sockets: a FIFO or unix socket never blocks or fools the
//     agent or the host.
//   - file-changed-while-collected: a file rewritten in a loop is still
//     after Stop.
//
// Lifecycle (backends that implement airlock.Reattacher; the others skip
// with the reason, as a restart ends their sandboxes):
//   - detach-reattach: a detached sandbox keeps running with its files;
//     Reattach by its ID gives a sandbox whose agent answers with them;
//     an ID the backend never made is an error.
//
// The package must not know any backend: it speaks airlock.Backend, the
// agent protocol, airlock.Reattacher and Detacher, and the optional
// Checker and Keeper interfaces.
package conformance
