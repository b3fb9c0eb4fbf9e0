// Package microvm is the microVM backend (isolation "vm"): each sandbox
// is a QEMU microvm guest with a kernel of its own (Debian's), started
// through the vmm.Driver interface (package qemu ships; package vmm has
// the interface, package qemu's doc maps it to Firecracker's API).
//
// A sandbox boots the image's guest artefacts (package image, BuildGuest:
// the kernel, our own initramfs whose /init is the image's agent running
// package guestinit, and a read-only ext4 root disk of the rootfs, built
// once per image and kept in the image store) with a scratch disk of its
// own: a sparse ext4 file sized to the disk limit (a copy of a formatted
// template), holding /workspace and /tmp, deleted with the sandbox. The
// agent speaks the agent protocol over a virtio-serial port whose host
// side is a unix socket in the machine's directory.
//
// A sandbox without a network has no network device at all. One with a
// network (SandboxSpec.Network, made by the node's egress) gets one
// virtio-net device on a tap inside the sandbox's network namespace: the
// backend adds the tap and a bridge joining it to the namespace's link,
// moves the link's address and default route from the namespace to the
// guest (kernel parameters its init reads, package guestinit), and hands
// the tap to the VMM as a descriptor (QEMU never opens /dev/net/tun). The
// guest's packets then leave by the same link, rules, resolver and egress
// proxy as a gVisor sandbox's; the tap goes with the VMM, the bridge with
// the namespace.
//
// Limits, all outside the guest: vCPUs (-smp, the CPU limit rounded up)
// and guest memory (-m, the memory limit: the guest kernel's OOM killer
// acts inside it, and the host reads its "Out of memory" lines on the
// console, which programs in the guest cannot write to); the VMM's host
// cgroup bounds QEMU's own memory (guest RAM plus Config.MemoryOverhead),
// CPU (the CPU limit plus a quarter of a CPU for the VMM's I/O thread;
// the guest itself never gets more than its vCPUs) and tasks; the disk is the scratch disk's size and
// inode count; the process count is RLIMIT_NPROC in the guest, enforced
// by the guest kernel.
//
// The VMM is jailed (package jailer): a host uid and gid of its own per
// sandbox from Config.UIDBase, a chroot holding only the machine's files,
// new mount, PID, IPC, UTS and network namespaces, and QEMU's seccomp
// sandbox.
//
// Stop asks the agent to end every program (kill -9 -1 as the sandbox
// user) and flush the disk, then quits the VMM; the workspace is then
// read from the host by mounting the scratch disk read-only from the
// first mount (loopdisk.MountReadOnly: a read-only loop device, ro,
// nosuid, nodev, noexec and noload), so the host kernel neither replays a
// journal the guest wrote nor writes anything to the disk. The mount
// still puts a file system the guest wrote in front of the host kernel's
// ext4 parser: writing a hostile one takes root in the guest first, and a
// userspace reader (debugfs rdump) would remove even that exposure.
// WorkspaceDir is empty until Stop: the host has no live view of a
// running guest's files.
//
// QEMU does not depend on the process that started it, but this version
// cannot reattach to a running guest yet, so the backend is no
// Reattacher and Reconcile ends what a crashed airlockd left: every VMM in the
// backend's cgroup parent (killed with its cgroup), and every machine
// directory with its chroot, disk and mounts.
//
// Snapshots (airlock.Snapshotter, so the provisioner's base snapshots,
// restore on demand and, on a node whose default backend this is, the
// warm pool use them): Checkpoint stops the vCPUs, migrates QEMU's state
// into a file (the descriptor handed over QMP, "fd:" migration) and
// copies the scratch disk; Restore starts a new jailed QEMU with
// -incoming defer, connects to the agent's port and the reseed port
// before the state is read (so the guest never sees its ports without a
// host), and reads it. Each clone is then made unique before anything
// runs in it: the host sends 64 bytes of fresh entropy on the reseed
// port, where a root process of the guest's init (the reseeder, which
// reads nothing else and is invisible to the sandbox user) adds them to
// the kernel's pool and reseeds its generator (RNDADDENTROPY,
// RNDRESEEDCRNG); the warm interpreters reseed from the kernel when they
// fork a program. Every machine also has a virtio-rng device on the
// host's /dev/urandom and a VM generation ID (QEMU 7.2's microvm does
// not put the latter in its ACPI tables, so the guest does not see it).
// A sandbox with a network is never checkpointed; a restored one has no
// network. Checkpoints name the guest artefacts, sizes and QEMU binary
// they need (SnapshotVersion).
//
// The package owns its state directory (StateDir/vms, StateDir/templates),
// the cgroups under its parent and the host uids of its range; it must
// not touch anything else on the host.
package microvm
