package qemu

import (
	"slices"
	"strings"
	"testing"

	"github.com/airlockhq/airlock/microvm/vmm"
)

// The command line is a microvm without PCI, defaults, user config or
// network, with QEMU's sandbox on, and with the paths of the jail.
func TestArgs(t *testing.T) {
	cfg := vmm.MachineConfig{ID: "vm1", Kernel: "/k", Initrd: "/i", Cmdline: "console=ttyS0", VCPUs: 2, MemoryMiB: 512,
		Drives:    []vmm.Drive{{ID: "root", Path: "/r", ReadOnly: true, Serial: "airlock-root"}, {ID: "scratch", Path: "/s"}},
		AgentPort: "airlock.agent"}
	for _, tt := range []struct {
		accel   vmm.Accel
		want    []string
		cmdline string
	}{
		{vmm.AccelTCG, []string{"tcg,tb-size=64", "max"}, "console=ttyS0 tsc_early_khz=2100000 tsc=reliable"},
		{vmm.AccelKVM, []string{"kvm", "host"}, "console=ttyS0"},
	} {
		d := &Driver{accel: tt.accel, tscKHz: 2100000}
		a := d.args(&cfg)
		joined := strings.Join(a, " ")
		for _, w := range []string{"-nodefaults", "-no-user-config", "-no-reboot", "microvm,pcie=off,x-option-roms=off,isa-serial=on",
			"on,obsolete=deny,elevateprivileges=deny,spawn=deny,resourcecontrol=deny", "-smp 2", "-m 512M",
			"-kernel /vmlinuz", "-initrd /initrd", "file=/disks/root,format=raw,if=none,discard=unmap,readonly=on",
			"virtio-blk-device,drive=root,serial=airlock-root", "file=/disks/scratch,format=raw,if=none,discard=unmap -device",
			"socket,id=agent,path=/run/agent.sock,server=on,wait=off", "virtserialport,chardev=agent,name=airlock.agent",
			"unix:/run/qmp.sock,server=on,wait=off", "-accel " + tt.want[0], "-cpu " + tt.want[1]} {
			if !strings.Contains(joined, w) {
				t.Errorf("%s: %q missing from %s", tt.accel, w, joined)
			}
		}
		if i := slices.Index(a, "-append"); i < 0 || a[i+1] != tt.cmdline {
			t.Errorf("%s: cmdline %q, want %q", tt.accel, a[i+1], tt.cmdline)
		}
		for _, bad := range []string{"-netdev", "-net ", "-nic", "pci", "-usb", "-vnc"} {
			if strings.Contains(strings.ReplaceAll(joined, "pcie=off", ""), bad) {
				t.Errorf("%s: %q in %s", tt.accel, bad, joined)
			}
		}
	}
}
