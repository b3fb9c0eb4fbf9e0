package qemu

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/airlockhq/airlock/backend/microvm/vmm"
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

// A machine with a network has exactly one interface, a virtio-net
// device on the tap handed in as descriptor 4; none without one.
func TestArgsNetwork(t *testing.T) {
	cfg := vmm.MachineConfig{ID: "vm1", Kernel: "/k", Initrd: "/i", VCPUs: 1, MemoryMiB: 256, AgentPort: "p",
		Net: &vmm.NetDevice{Tap: os.Stdin, MAC: "02:00:00:00:00:01"}}
	joined := strings.Join((&Driver{accel: vmm.AccelTCG}).args(&cfg), " ")
	for _, w := range []string{"-netdev tap,id=net0,fd=4 ", "-device virtio-net-device,netdev=net0,mac=02:00:00:00:00:01 "} {
		if strings.Count(joined, w) != 1 {
			t.Errorf("%q not once in %s", w, joined)
		}
	}
	if strings.Count(joined, "-netdev") != 1 || strings.Contains(joined, "script=") || strings.Contains(joined, "ifname=") {
		t.Errorf("more than the one tap by descriptor: %s", joined)
	}
	cfg.Net = nil
	if joined := strings.Join((&Driver{accel: vmm.AccelTCG}).args(&cfg), " "); strings.Contains(joined, "net") {
		t.Errorf("a machine without a network has a network device: %s", joined)
	}
}

// Every machine has the host's entropy (virtio-rng), a VM generation ID
// and, with a reseed port, a second virtio-serial port on its own
// socket; a restored one reads its state from the descriptor after the
// tap's, once told to (-incoming defer).
func TestArgsReseedAndIncoming(t *testing.T) {
	cfg := vmm.MachineConfig{ID: "vm1", Kernel: "/k", Initrd: "/i", VCPUs: 1, MemoryMiB: 256, AgentPort: "airlock.agent", ReseedPort: "airlock.reseed"}
	joined := strings.Join((&Driver{accel: vmm.AccelTCG}).args(&cfg), " ")
	for _, w := range []string{"rng-random,id=rng0,filename=/dev/urandom", "virtio-rng-device,rng=rng0", "vmgenid,guid=auto",
		"virtio-serial-device,max_ports=3", "socket,id=reseed,path=/run/reseed.sock,server=on,wait=off", "virtserialport,chardev=reseed,name=airlock.reseed"} {
		if !strings.Contains(joined, w) {
			t.Errorf("%q missing from %s", w, joined)
		}
	}
	if strings.Contains(joined, "-incoming") {
		t.Errorf("a booted machine waits for a state: %s", joined)
	}
	for _, tt := range []struct {
		net           bool
		tap, incoming int
	}{{false, 0, 4}, {true, 4, 5}} {
		c := cfg
		c.Incoming = os.Stdin
		if tt.net {
			c.Net = &vmm.NetDevice{Tap: os.Stdin, MAC: "02:00:00:00:00:01"}
		}
		tap, incoming := extraFDs(&c)
		if tap != tt.tap || incoming != tt.incoming {
			t.Errorf("network %v: descriptors tap %d incoming %d, want %d %d", tt.net, tap, incoming, tt.tap, tt.incoming)
		}
		if a := strings.Join((&Driver{accel: vmm.AccelTCG}).args(&c), " "); !strings.Contains(a, "-incoming defer") {
			t.Errorf("a restored machine does not wait for its state: %s", a)
		}
	}
}
