package guestinit

import (
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
)

// ConfigPath is where the initramfs holds the Config, as JSON.
const ConfigPath = "/airlock/guest.json"

// InitPath is the init program in the initramfs (the agent binary).
const InitPath = "/init"

// Kernel command-line parameters the host sets per VM.
const (
	ParamNproc = "airlock.nproc" // RLIMIT_NPROC of the sandbox user
)

// Config is what the image builder tells the guest's init.
type Config struct {
	// Modules are initramfs paths of kernel modules, loaded in order.
	Modules []string `json:"modules"`
	// RootSerial and ScratchSerial are the serial numbers of the virtio
	// block devices of the read-only root disk and the writable scratch
	// disk (ext4), as the host sets them: the guest finds each by its
	// serial in /sys/block, whatever order they were probed in.
	RootSerial    string `json:"root_serial"`
	ScratchSerial string `json:"scratch_serial"`
	// Port is the name of the agent's virtio-serial port (the guest's
	// /dev/vport<N>p<M> whose /sys/class/virtio-ports entry has it).
	Port string `json:"port"`
	// Agent is the agent's path in the root disk.
	Agent string `json:"agent"`
	// Env of the agent and, through it, of every program.
	Env      []string `json:"env"`
	Hostname string   `json:"hostname"`
	UID      int      `json:"uid"`
	GID      int      `json:"gid"`
}

// Validate checks c.
func (c *Config) Validate() error {
	for _, p := range append([]string{c.Agent}, c.Modules...) {
		if !filepath.IsAbs(p) {
			return fmt.Errorf("guestinit: path %q is not absolute", p)
		}
	}
	if c.RootSerial == "" || c.ScratchSerial == "" || c.Port == "" {
		return errors.New("guestinit: the disks' serials and the port's name are required")
	}
	if c.UID <= 0 || c.GID <= 0 {
		return errors.New("guestinit: the sandbox user must not be root")
	}
	if c.Hostname == "" {
		return errors.New("guestinit: no hostname")
	}
	return nil
}

// CmdlineInt returns the integer value of param in a kernel command line,
// or def when it is absent or not a positive number.
func CmdlineInt(cmdline, param string, def int64) int64 {
	for _, f := range strings.Fields(cmdline) {
		if v, ok := strings.CutPrefix(f, param+"="); ok {
			if n, err := strconv.ParseInt(v, 10, 64); err == nil && n > 0 {
				return n
			}
		}
	}
	return def
}
