package vmm_test

import (
	"os"
	"testing"

	"github.com/airlockhq/airlock/backend/microvm/vmm"
)

func TestMachineConfigValidate(t *testing.T) {
	good := func() vmm.MachineConfig {
		return vmm.MachineConfig{ID: "vm-1", Kernel: "/k", Initrd: "/i", VCPUs: 1, MemoryMiB: 256, AgentPort: "airlock.agent",
			Drives: []vmm.Drive{{ID: "root", Path: "/r", ReadOnly: true, Serial: "airlock-root"}},
			Jail:   vmm.Jail{UID: 100000, GID: 100000, Dir: "/var/lib/x"}}
	}
	tests := []struct {
		name string
		edit func(*vmm.MachineConfig)
		ok   bool
	}{
		{"good", func(*vmm.MachineConfig) {}, true},
		{"id with a slash", func(c *vmm.MachineConfig) { c.ID = "../x" }, false},
		{"relative kernel", func(c *vmm.MachineConfig) { c.Kernel = "k" }, false},
		{"no vcpu", func(c *vmm.MachineConfig) { c.VCPUs = 0 }, false},
		{"tiny memory", func(c *vmm.MachineConfig) { c.MemoryMiB = 8 }, false},
		{"port name with a comma", func(c *vmm.MachineConfig) { c.AgentPort = "a,b" }, false},
		{"drive id with a comma", func(c *vmm.MachineConfig) { c.Drives[0].ID = "root,file=/etc/shadow" }, false},
		{"serial with a comma", func(c *vmm.MachineConfig) { c.Drives[0].Serial = "x,readonly=off" }, false},
		{"repeated drive", func(c *vmm.MachineConfig) { c.Drives = append(c.Drives, c.Drives[0]) }, false},
		{"root vmm", func(c *vmm.MachineConfig) { c.Jail.UID = 0 }, false},
		{"relative jail", func(c *vmm.MachineConfig) { c.Jail.Dir = "x" }, false},
		{"network", func(c *vmm.MachineConfig) { c.Net = &vmm.NetDevice{Tap: os.Stdin, MAC: "02:00:00:00:00:01"} }, true},
		{"network without a tap", func(c *vmm.MachineConfig) { c.Net = &vmm.NetDevice{MAC: "02:00:00:00:00:01"} }, false},
		{"multicast MAC", func(c *vmm.MachineConfig) { c.Net = &vmm.NetDevice{Tap: os.Stdin, MAC: "03:00:00:00:00:01"} }, false},
		{"MAC with an option", func(c *vmm.MachineConfig) { c.Net = &vmm.NetDevice{Tap: os.Stdin, MAC: "02:00:00:00:00:01,romfile=/x"} }, false},
		{"reseed port", func(c *vmm.MachineConfig) { c.ReseedPort = "airlock.reseed" }, true},
		{"reseed port with a comma", func(c *vmm.MachineConfig) { c.ReseedPort = "r,name=x" }, false},
		{"reseed port is the agent's", func(c *vmm.MachineConfig) { c.ReseedPort = c.AgentPort }, false},
		{"long MAC", func(c *vmm.MachineConfig) {
			c.Net = &vmm.NetDevice{Tap: os.Stdin, MAC: "02:00:00:00:00:00:00:01"}
		}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := good()
			tt.edit(&c)
			if err := c.Validate(); (err == nil) != tt.ok {
				t.Errorf("Validate() = %v, want ok %v", err, tt.ok)
			}
		})
	}
}
