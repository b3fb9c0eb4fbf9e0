package jailer_test

import (
	"testing"

	"github.com/airlockhq/airlock/backend/microvm/jailer"
)

func TestConfigValidate(t *testing.T) {
	good := func() jailer.Config {
		return jailer.Config{Root: "/var/lib/x/jail", UID: 100000, GID: 100000, Exec: "/usr/bin/qemu-system-x86_64",
			Binds:    []jailer.Bind{{Source: "/usr", Target: "/usr", ReadOnly: true}},
			Symlinks: [][2]string{{"usr/lib", "/lib"}}}
	}
	tests := []struct {
		name string
		edit func(*jailer.Config)
		ok   bool
	}{
		{"good", func(*jailer.Config) {}, true},
		{"root as root", func(c *jailer.Config) { c.Root = "/" }, false},
		{"relative root", func(c *jailer.Config) { c.Root = "jail" }, false},
		{"uid 0", func(c *jailer.Config) { c.UID = 0 }, false},
		{"gid 0", func(c *jailer.Config) { c.GID = 0 }, false},
		{"relative exec", func(c *jailer.Config) { c.Exec = "qemu" }, false},
		{"bind out of the root", func(c *jailer.Config) { c.Binds[0].Target = "/../etc" }, false},
		{"bind over the root", func(c *jailer.Config) { c.Binds[0].Target = "/" }, false},
		{"unclean bind", func(c *jailer.Config) { c.Binds[0].Target = "/usr/../../etc" }, false},
		{"symlink out of the root", func(c *jailer.Config) { c.Symlinks[0][1] = "../lib" }, false},
		{"keep a tap", func(c *jailer.Config) { c.KeepFDs = []int{4} }, true},
		{"keep the config pipe", func(c *jailer.Config) { c.KeepFDs = []int{3} }, false},
		{"keep stdout", func(c *jailer.Config) { c.KeepFDs = []int{1} }, false},
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
