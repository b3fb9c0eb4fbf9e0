// Package guest is the first process of a microVM guest: the image's
// own agent binary, placed at /init in the guest's initramfs (built by
// package image), run by the guest kernel as PID 1. cmd/airlock-agent
// calls RunIfAsked first thing; it turns PID 1 into the confined agent.
//
// In this order it: mounts /proc and a devtmpfs in the initramfs; loads
// the kernel modules the initramfs carries with finit_module(2), in the
// order of its Config (virtio_ring, virtio, virtio_mmio, virtio_console,
// virtio_blk, the ext4 stack); hardens the guest kernel through sysctls
// (no more modules, restricted dmesg, kptr, BPF, userfaultfd, perf, user
// namespaces); waits for the root disk, the scratch disk and the agent's
// virtio-serial port; mounts the root disk read-only and the scratch
// disk's workspace/ and tmp/ at /workspace and /tmp; builds a minimal
// /dev (a tmpfs with null, zero, full, random, urandom, tty, a private
// devpts and /dev/shm: no block device, no console, no kmsg), a /proc
// that shows only the sandbox user's processes (hidepid) and a
// read-only /sys; opens the port; moves the root disk over the initramfs
// and chroots into it; sets the hostname and brings loopback up; sets the
// resource limits the host put on the kernel command line; drops to the
// sandbox user, clears every capability, sets no_new_privs, installs the
// namespaces backend's seccomp allow-list as a second layer; and execs
// the agent with the port as its stdin and stdout. Failures go to the
// guest's console (the host's log of the VM), and the guest powers off.
//
// It runs inside the guest before any untrusted code: it must not import
// host-side packages; what it needs comes from its Config (internal/guestabi, written into
// the initramfs by the image builder) and the kernel command line.
package guest
