package jailer

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
)

// Arg is the first argument that makes a binary the jailer.
const Arg = "airlock-jailer"

// ConfigFD is the descriptor the jailer reads its Config from, to EOF.
const ConfigFD = 3

// Bind is a host path bind-mounted into the chroot.
type Bind struct {
	Source   string `json:"source"` // host path
	Target   string `json:"target"` // path inside the chroot
	ReadOnly bool   `json:"read_only"`
}

// Config is what the jailer does.
type Config struct {
	Root     string      `json:"root"` // host path of the chroot directory
	UID      int         `json:"uid"`
	GID      int         `json:"gid"`
	Hostname string      `json:"hostname"`
	Binds    []Bind      `json:"binds"`
	Symlinks [][2]string `json:"symlinks"` // {target, link path inside the chroot}
	// Exec is the program's path inside the chroot; Args its arguments
	// after argv[0].
	Exec string   `json:"exec"`
	Args []string `json:"args"`
	Env  []string `json:"env"`
	// KeepFDs are descriptors (after ConfigFD) the program inherits,
	// handed to the jailer as extra files (a tap device); every other
	// descriptor is closed on exec.
	KeepFDs []int `json:"keep_fds,omitempty"`
}

// Validate checks c.
func (c *Config) Validate() error {
	if !filepath.IsAbs(c.Root) || c.Root == "/" {
		return fmt.Errorf("jailer: bad root %q", c.Root)
	}
	if c.UID <= 0 || c.GID <= 0 {
		return errors.New("jailer: the program must not run as root")
	}
	if !filepath.IsAbs(c.Exec) {
		return fmt.Errorf("jailer: exec path %q is not absolute", c.Exec)
	}
	for _, b := range c.Binds {
		if !filepath.IsAbs(b.Source) || !inside(b.Target) {
			return fmt.Errorf("jailer: bad bind %s -> %s", b.Source, b.Target)
		}
	}
	for _, l := range c.Symlinks {
		if !inside(l[1]) {
			return fmt.Errorf("jailer: bad symlink %s", l[1])
		}
	}
	for _, fd := range c.KeepFDs {
		if fd <= ConfigFD || fd > 64 {
			return fmt.Errorf("jailer: descriptor %d cannot be kept", fd)
		}
	}
	if c.Hostname == "" {
		c.Hostname = "vmm"
	}
	return nil
}

// inside reports whether p is an absolute path that stays below the
// chroot's root.
func inside(p string) bool {
	return filepath.IsAbs(p) && filepath.Clean(p) == p && p != "/" && !strings.Contains(p, "/../")
}
