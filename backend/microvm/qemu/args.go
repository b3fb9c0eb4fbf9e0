package qemu

import (
	"fmt"
	"strings"

	"github.com/airlockhq/airlock/backend/microvm/vmm"
)

// Paths inside a machine's chroot.
const (
	jailKernel = "/vmlinuz"
	jailInitrd = "/initrd"
	jailDisks  = "/disks"
	jailRun    = "/run" // the VMM's own directory: its sockets
	agentSock  = "agent.sock"
	reseedSock = "reseed.sock"
	qmpSock    = "qmp.sock"
	// firstFD is QEMU's first descriptor past the jailer's config pipe:
	// the tap's, then the incoming state's (extraFDs).
	firstFD = 4
)

// args is QEMU's command line for cfg, with paths inside the chroot.
func (d *Driver) args(cfg *vmm.MachineConfig) []string {
	accel, cpu := "tcg,tb-size=64", "max"
	cmdline := cfg.Cmdline
	if d.accel == vmm.AccelKVM {
		accel, cpu = "kvm", "host"
	} else if d.tscKHz > 0 {
		cmdline += fmt.Sprintf(" tsc_early_khz=%d tsc=reliable", d.tscKHz)
	}
	a := []string{
		"-name", cfg.ID,
		"-M", "microvm,pcie=off,x-option-roms=off,isa-serial=on",
		"-accel", accel,
		"-cpu", cpu,
		"-smp", fmt.Sprint(cfg.VCPUs),
		"-m", fmt.Sprintf("%dM", cfg.MemoryMiB),
		"-nodefaults", "-no-user-config", "-display", "none", "-no-reboot",
		"-sandbox", "on,obsolete=deny,elevateprivileges=deny,spawn=deny,resourcecontrol=deny",
		"-kernel", jailKernel,
		"-initrd", jailInitrd,
		"-append", cmdline,
		"-chardev", "stdio,id=console,signal=off",
		"-serial", "chardev:console",
	}
	for _, dr := range cfg.Drives {
		opts := []string{"id=" + dr.ID, "file=" + jailDisks + "/" + dr.ID, "format=raw", "if=none", "discard=unmap"}
		if dr.ReadOnly {
			opts = append(opts, "readonly=on")
		}
		dev := "virtio-blk-device,drive=" + dr.ID
		if dr.Serial != "" {
			dev += ",serial=" + dr.Serial
		}
		a = append(a, "-drive", strings.Join(opts, ","), "-device", dev)
	}
	tap, incoming := extraFDs(cfg)
	if cfg.Net != nil {
		a = append(a,
			"-netdev", fmt.Sprintf("tap,id=net0,fd=%d", tap),
			"-device", "virtio-net-device,netdev=net0,mac="+cfg.Net.MAC)
	}
	// Entropy from the host for the guest's kernel (its hwrng), and a VM
	// generation ID, which a guest kernel reseeds its generator on when
	// it changes (a restore). QEMU 7.2's microvm does not describe the
	// generation ID in its ACPI tables, so Debian's 6.1 guest does not
	// see it: the reseed port (Machine.Reseed) is what makes restored
	// clones draw numbers of their own.
	a = append(a,
		"-object", "rng-random,id=rng0,filename=/dev/urandom",
		"-device", "virtio-rng-device,rng=rng0",
		"-device", "vmgenid,guid=auto")
	if incoming > 0 {
		// The state is read once the host has connected to the agent's
		// port (Start: migrate-incoming), so the guest never sees the
		// port without a host.
		a = append(a, "-incoming", "defer")
	}
	// Port 0 of a virtio-serial device is kept for a console: ports 1
	// and 2 are the agent's and the reseeder's.
	a = append(a,
		"-device", "virtio-serial-device,max_ports=3",
		"-chardev", "socket,id=agent,path="+jailRun+"/"+agentSock+",server=on,wait=off",
		"-device", "virtserialport,chardev=agent,name="+cfg.AgentPort)
	if cfg.ReseedPort != "" {
		a = append(a,
			"-chardev", "socket,id=reseed,path="+jailRun+"/"+reseedSock+",server=on,wait=off",
			"-device", "virtserialport,chardev=reseed,name="+cfg.ReseedPort)
	}
	a = append(a,
		"-qmp", "unix:"+jailRun+"/"+qmpSock+",server=on,wait=off",
	)
	return a
}

// extraFDs are QEMU's descriptors of the tap and the incoming state, 0
// for those the machine has not.
func extraFDs(cfg *vmm.MachineConfig) (tap, incoming int) {
	next := firstFD
	if cfg.Net != nil {
		tap, next = next, next+1
	}
	if cfg.Incoming != nil {
		incoming = next
	}
	return tap, incoming
}
