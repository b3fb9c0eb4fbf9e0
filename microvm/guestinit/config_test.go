package guestinit_test

import (
	"testing"

	"github.com/airlockhq/airlock/microvm/guestinit"
)

func TestCmdlineInt(t *testing.T) {
	tests := []struct {
		cmdline string
		want    int64
	}{
		{"console=ttyS0 airlock.nproc=64 quiet", 64},
		{"airlock.nproc=64 airlock.nproc=128", 64},
		{"console=ttyS0", 256},
		{"airlock.nproc=-5", 256},
		{"airlock.nproc=lots", 256},
		{"xairlock.nproc=9", 256},
		{"airlock.nproc=", 256},
	}
	for _, tt := range tests {
		if got := guestinit.CmdlineInt(tt.cmdline, guestinit.ParamNproc, 256); got != tt.want {
			t.Errorf("CmdlineInt(%q) = %d, want %d", tt.cmdline, got, tt.want)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	good := guestinit.Config{Modules: []string{"/lib/modules/virtio.ko"}, RootSerial: "r", ScratchSerial: "s", Port: "p",
		Agent: "/opt/airlock/bin/airlock-agent", Hostname: "sandbox", UID: 1000, GID: 1000}
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	for name, edit := range map[string]func(*guestinit.Config){
		"root user":       func(c *guestinit.Config) { c.UID = 0 },
		"relative agent":  func(c *guestinit.Config) { c.Agent = "agent" },
		"relative module": func(c *guestinit.Config) { c.Modules = []string{"x.ko"} },
		"no port":         func(c *guestinit.Config) { c.Port = "" },
		"no hostname":     func(c *guestinit.Config) { c.Hostname = "" },
	} {
		c := good
		edit(&c)
		if c.Validate() == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
