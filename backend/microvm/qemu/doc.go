// Package qemu is the vmm.Driver for QEMU's microvm machine type
// (qemu-system-x86_64 from Debian's packages): no PCI, no option ROMs,
// virtio-mmio devices only, -nodefaults and -no-user-config, QEMU's own
// seccomp sandbox on (-sandbox on,obsolete=deny,elevateprivileges=deny,
// spawn=deny,resourcecontrol=deny), run by package jailer as an
// unprivileged uid in a chroot holding only the machine's files, in its
// own cgroup and namespaces, and controlled over QMP with our own small
// client (qmp.go: the protocol is a line of JSON each way; no
// well-kept Go QMP library is served by the module proxy that would be
// smaller than the few calls we make).
//
// Acceleration is chosen once, by New: a short boot of the guest kernel
// with -accel kvm (Probe) tells a usable KVM from none at all or a
// paravirtualised one that boots only its own guest kernels; otherwise
// TCG. Under TCG the guest gets the host's TSC frequency on its command
// line (tsc_early_khz), because it cannot calibrate the TSC against an
// emulated timer on a busy host.
//
// # Mapping to Firecracker
//
// Every operation of the driver has a Firecracker counterpart, so that a
// Firecracker driver can implement vmm.Driver beside this one (none ships:
// no package registry we use carries Firecracker):
//
//   - MachineConfig.VCPUs and MemoryMiB: here -smp and -m; Firecracker
//     PUT /machine-config {vcpu_count, mem_size_mib}.
//   - Kernel, Initrd, Cmdline: here -kernel, -initrd, -append;
//     Firecracker PUT /boot-source {kernel_image_path, initrd_path,
//     boot_args} (it boots an uncompressed vmlinux, so the image
//     pipeline would extract it from the bzImage).
//   - Drives: here -drive if=none + -device virtio-blk-device,serial=;
//     Firecracker PUT /drives/{id} {path_on_host, is_read_only,
//     is_root_device: false} (no serial: the guest would find its disks
//     by order, or by a partition UUID).
//   - AgentPort (virtio-serial to a unix socket): Firecracker has no
//     virtio-console; its PUT /vsock {guest_cid, uds_path} gives a
//     vsock whose host side is a unix socket (connect, then "CONNECT
//     <port>\n"), and the agent would listen on vsock instead of the
//     port.
//   - Net (a tap the caller made in the sandbox's network namespace):
//     here -netdev tap,fd=4 on the descriptor the jailer keeps open for
//     QEMU, and -device virtio-net-device,mac=; Firecracker PUT
//     /network-interfaces/{id} {host_dev_name, guest_mac} opens the tap
//     by name itself, so its jailer's --netns would be the sandbox's
//     namespace and its chroot would need /dev/net/tun.
//   - Start: here the jailer execs QEMU, which boots at once;
//     Firecracker's own jailer (--uid, --gid, --chroot-base-dir,
//     --cgroup, --netns) starts it, and PUT /actions
//     {action_type: "InstanceStart"} boots it after the PUTs above.
//   - Pause and Resume: here QMP stop and cont; Firecracker PATCH /vm
//     {state: "Paused" | "Resumed"}.
//   - Shutdown: here QMP quit; Firecracker has no quit (SendCtrlAltDel
//     is a guest request): SIGKILL of the jailed process, as Kill.
//   - Snapshots (later work here: QMP getfd and migrate to "fd:" on a
//     file, and a new QEMU with -incoming defer and migrate-incoming
//     "fd:"; QEMU 7.2 has no "file:" URI, and "exec:" would spawn a
//     shell, which the seccomp sandbox's spawn=deny forbids): Firecracker PUT /snapshot/create {snapshot_path,
//     mem_file_path} of a paused VM, and PUT /snapshot/load
//     {snapshot_path, mem_backend, resume_vm} into a fresh process.
//   - Accel: Firecracker needs KVM; its driver's Accel is always kvm and
//     New fails without /dev/kvm.
//
// The package owns the QEMU processes it starts and the files it makes in
// each machine's directory; the caller owns the directory, the cgroup
// and the uid.
package qemu
