// Package vmm is the interface between the microVM backend and a virtual
// machine monitor: a Driver starts a Machine from a MachineConfig (kernel,
// initramfs, command line, drives, the agent's port, a network device on
// a tap handed in as a descriptor, vCPUs and memory)
// inside a Jail (an unprivileged uid, a chroot, a cgroup, namespaces),
// and a Machine is controlled through its monitor (QMP for QEMU).
//
// It owns only these types. Package qemu is the one driver shipped; the
// mapping of every operation to Firecracker's API, for a second driver,
// is in the qemu package documentation.
package vmm
