package guestabi

import (
	"encoding/base64"
	"errors"
	"fmt"
	"net/netip"
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
	// ReseedPort is the name of the virtio-serial port the host sends
	// fresh entropy on after a restore (read by a root process of its
	// own, the reseeder, never the agent); empty: none.
	ReseedPort string `json:"reseed_port,omitempty"`
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

// Kernel command-line parameters of a guest with a network.
const (
	// ParamNet is the guest interface's address and default gateway:
	// airlock.net=10.0.0.2/30,10.0.0.1.
	ParamNet = "airlock.net"
	// ParamResolv is the guest's /etc/resolv.conf, base64 (URL
	// alphabet, no padding).
	ParamResolv = "airlock.resolv"
)

// maxResolvConf caps the resolv.conf a command line carries (the whole
// line is at most 2 KiB on x86).
const maxResolvConf = 512

// NetConfig is the network of a guest that has one: the address of its
// only interface (virtio-net), the default gateway on that link, and its
// resolv.conf.
type NetConfig struct {
	Addr       netip.Prefix
	Gateway    netip.Addr
	ResolvConf string
}

// Validate checks n.
func (n *NetConfig) Validate() error {
	if !n.Addr.IsValid() || !n.Addr.Addr().Is4() || n.Addr.Bits() < 8 || n.Addr.Bits() > 30 {
		return fmt.Errorf("guestinit: bad guest address %v", n.Addr)
	}
	if !n.Gateway.Is4() || !n.Addr.Masked().Contains(n.Gateway) || n.Gateway == n.Addr.Addr() {
		return fmt.Errorf("guestinit: gateway %v is not another address of %v", n.Gateway, n.Addr)
	}
	if len(n.ResolvConf) > maxResolvConf {
		return fmt.Errorf("guestinit: resolv.conf of %d bytes is too long", len(n.ResolvConf))
	}
	return nil
}

// Cmdline is n as kernel command-line parameters.
func (n *NetConfig) Cmdline() string {
	return fmt.Sprintf("%s=%s,%s %s=%s", ParamNet, n.Addr, n.Gateway, ParamResolv, base64.RawURLEncoding.EncodeToString([]byte(n.ResolvConf)))
}

// ParseNet reads a guest's network from its kernel command line: nil
// when it has none (no ParamNet), an error when the parameters are
// there but malformed.
func ParseNet(cmdline string) (*NetConfig, error) {
	var netv, resolv string
	var seenNet, seenResolv bool
	for _, f := range strings.Fields(cmdline) {
		if v, ok := strings.CutPrefix(f, ParamNet+"="); ok {
			if seenNet {
				return nil, errors.New("guestinit: " + ParamNet + " given twice")
			}
			netv, seenNet = v, true
		} else if v, ok := strings.CutPrefix(f, ParamResolv+"="); ok {
			if seenResolv {
				return nil, errors.New("guestinit: " + ParamResolv + " given twice")
			}
			resolv, seenResolv = v, true
		}
	}
	if !seenNet {
		if seenResolv {
			return nil, errors.New("guestinit: " + ParamResolv + " without " + ParamNet)
		}
		return nil, nil
	}
	addr, gw, ok := strings.Cut(netv, ",")
	if !ok {
		return nil, fmt.Errorf("guestinit: %s=%q: want ADDRESS/BITS,GATEWAY", ParamNet, netv)
	}
	var n NetConfig
	var err error
	if n.Addr, err = netip.ParsePrefix(addr); err != nil {
		return nil, fmt.Errorf("guestinit: %s: %w", ParamNet, err)
	}
	if n.Gateway, err = netip.ParseAddr(gw); err != nil {
		return nil, fmt.Errorf("guestinit: %s: %w", ParamNet, err)
	}
	if len(resolv) > base64.RawURLEncoding.EncodedLen(maxResolvConf) {
		return nil, fmt.Errorf("guestinit: %s is too long", ParamResolv)
	}
	rc, err := base64.RawURLEncoding.DecodeString(resolv)
	if err != nil {
		return nil, fmt.Errorf("guestinit: %s: %w", ParamResolv, err)
	}
	n.ResolvConf = string(rc)
	if err := n.Validate(); err != nil {
		return nil, err
	}
	return &n, nil
}
