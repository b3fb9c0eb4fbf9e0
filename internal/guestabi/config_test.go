package guestabi_test

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/airlockhq/airlock/internal/guestabi"
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
		if got := guestabi.CmdlineInt(tt.cmdline, guestabi.ParamNproc, 256); got != tt.want {
			t.Errorf("CmdlineInt(%q) = %d, want %d", tt.cmdline, got, tt.want)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	good := guestabi.Config{Modules: []string{"/lib/modules/virtio.ko"}, RootSerial: "r", ScratchSerial: "s", Port: "p",
		Agent: "/opt/airlock/bin/airlock-agent", Hostname: "sandbox", UID: 1000, GID: 1000}
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	for name, edit := range map[string]func(*guestabi.Config){
		"root user":       func(c *guestabi.Config) { c.UID = 0 },
		"relative agent":  func(c *guestabi.Config) { c.Agent = "agent" },
		"relative module": func(c *guestabi.Config) { c.Modules = []string{"x.ko"} },
		"no port":         func(c *guestabi.Config) { c.Port = "" },
		"no hostname":     func(c *guestabi.Config) { c.Hostname = "" },
	} {
		c := good
		edit(&c)
		if c.Validate() == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestNetCmdline(t *testing.T) {
	n := guestabi.NetConfig{
		Addr:       netip.MustParsePrefix("10.200.0.2/30"),
		Gateway:    netip.MustParseAddr("10.200.0.1"),
		ResolvConf: "nameserver 10.200.0.1\noptions ndots:0 timeout:2 attempts:2\n",
	}
	if err := n.Validate(); err != nil {
		t.Fatal(err)
	}
	line := "console=ttyS0 quiet " + n.Cmdline() + " airlock.nproc=64"
	got, err := guestabi.ParseNet(line)
	if err != nil || got == nil || *got != n {
		t.Fatalf("ParseNet(%q) = %+v, %v; want %+v", line, got, err, n)
	}
	if strings.ContainsAny(n.Cmdline(), "\n\"") || strings.Count(n.Cmdline(), " ") != 1 {
		t.Errorf("the parameters are not two plain words: %q", n.Cmdline())
	}
	if got, err := guestabi.ParseNet("console=ttyS0 airlock.nproc=64"); got != nil || err != nil {
		t.Errorf("no network: %+v, %v", got, err)
	}
	for _, bad := range []string{
		"airlock.net=10.0.0.2/30",
		"airlock.net=10.0.0.2,10.0.0.1",
		"airlock.net=10.0.0.2/30,10.0.1.1",
		"airlock.net=10.0.0.2/30,10.0.0.2",
		"airlock.net=10.0.0.2/31,10.0.0.3",
		"airlock.net=fd00::2/64,fd00::1",
		"airlock.net=10.0.0.2/30,10.0.0.1 airlock.net=10.0.0.6/30,10.0.0.5",
		"airlock.net=10.0.0.2/30,10.0.0.1 airlock.resolv=!!",
		"airlock.resolv=bmFtZXNlcnZlcg",
		"airlock.net=10.0.0.2/30,10.0.0.1 airlock.resolv=" + strings.Repeat("QUFB", 200),
	} {
		if got, err := guestabi.ParseNet(bad); err == nil {
			t.Errorf("ParseNet(%q) = %+v, want an error", bad, got)
		}
	}
}

// FuzzParseNet: whatever the command line, ParseNet returns a valid
// config, nothing, or an error, and a config it returns says the same
// when written and read again.
func FuzzParseNet(f *testing.F) {
	f.Add("airlock.net=10.0.0.2/30,10.0.0.1 airlock.resolv=bmFtZXNlcnZlciAxMC4wLjAuMQo")
	f.Add("airlock.net=10.0.0.2/30 airlock.resolv=")
	f.Add("console=ttyS0")
	f.Fuzz(func(t *testing.T, line string) {
		n, err := guestabi.ParseNet(line)
		if err != nil || n == nil {
			return
		}
		if err := n.Validate(); err != nil {
			t.Fatalf("ParseNet(%q) returned an invalid config: %v", line, err)
		}
		again, err := guestabi.ParseNet(n.Cmdline())
		if err != nil || again == nil || *again != *n {
			t.Fatalf("round trip of %+v: %+v, %v", n, again, err)
		}
	})
}
