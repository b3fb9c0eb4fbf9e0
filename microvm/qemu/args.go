package qemu

import (
	"fmt"
	"strings"

	"github.com/airlockhq/airlock/microvm/vmm"
)

// Paths inside a machine's chroot.
const (
	jailKernel = "/vmlinuz"
	jailInitrd = "/initrd"
	jailDisks  = "/disks"
	jailRun    = "/run" // the VMM's own directory: its sockets
	agentSock  = "agent.sock"
	// tapFD is the tap's descriptor in QEMU: the jailer's extra file
	// after its config pipe.
	tapFD   = 4
	qmpSock = "qmp.sock"
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
	if cfg.Net != nil {
		a = append(a,
			"-netdev", fmt.Sprintf("tap,id=net0,fd=%d", tapFD),
			"-device", "virtio-net-device,netdev=net0,mac="+cfg.Net.MAC)
	}
	a = append(a,
		"-device", "virtio-serial-device,max_ports=2",
		"-chardev", "socket,id=agent,path="+jailRun+"/"+agentSock+",server=on,wait=off",
		"-device", "virtserialport,chardev=agent,name="+cfg.AgentPort,
		"-qmp", "unix:"+jailRun+"/"+qmpSock+",server=on,wait=off",
	)
	return a
}
