package vmm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
)

// Accel is how a machine's vCPUs run.
type Accel string

const (
	// AccelKVM runs the guest on hardware virtualisation.
	AccelKVM Accel = "kvm"
	// AccelTCG emulates the guest's CPU in software (QEMU's TCG): slow,
	// but the same isolation and code paths.
	AccelTCG Accel = "tcg"
)

// Driver starts machines of one VMM.
type Driver interface {
	// Name of the VMM ("qemu").
	Name() string
	// Accel is the acceleration machines of this driver use, chosen when
	// the driver was made.
	Accel() Accel
	// Start jails and boots a machine and returns once the VMM runs (not
	// once the guest has booted). On error nothing of it is left.
	Start(ctx context.Context, cfg MachineConfig) (Machine, error)
}

// Machine is one running VMM process and its guest.
type Machine interface {
	// PID of the VMM process on the host.
	PID() int
	// AgentSocket is the host path of the unix socket behind the guest's
	// agent port: connect to it to talk to the agent.
	AgentSocket() string
	// Done is closed when the VMM process has exited.
	Done() <-chan struct{}
	// AgentConn is the connection to the agent's port that the driver
	// made while restoring the machine (MachineConfig.Incoming), before
	// the guest ran again, so that the guest never sees its port without
	// a host; nil for a machine that booted.
	AgentConn() net.Conn
	// Snapshot stops the vCPUs and saves the machine's state (memory and
	// devices) into w, a stream a MachineConfig.Incoming restores into a
	// new machine with the same devices; the machine stays stopped. Its
	// disks are the caller's to copy once Snapshot returns.
	Snapshot(ctx context.Context, w *os.File) error
	// Reseed sends the guest fresh entropy on its reseed port and waits
	// until the guest says its kernel reseeded its random generator (a
	// clone of a saved state must not draw its siblings' numbers).
	Reseed(ctx context.Context, seed []byte) error
	// Pause stops the vCPUs; Resume lets them run again.
	Pause(ctx context.Context) error
	Resume(ctx context.Context) error
	// Shutdown asks the VMM to quit at once (the guest does not get to
	// run its shutdown) and waits for the process to exit; Kill sends it
	// SIGKILL and waits. Both are safe to call more than once.
	Shutdown(ctx context.Context) error
	Kill() error
}

// Drive is a block device of the guest (virtio-blk over MMIO).
type Drive struct {
	ID       string // [a-z0-9-]
	Path     string // host path of a raw disk image
	ReadOnly bool
	// Serial is what the guest reads in /sys/block/vdX/serial, so it can
	// tell its disks apart whatever their order.
	Serial string
}

// NetDevice is the guest's network interface (virtio-net over MMIO) on a
// tap device the caller made: the VMM reads and writes the guest's frames
// through Tap, a descriptor it is handed (it never opens /dev/net/tun and
// needs no privilege for it).
type NetDevice struct {
	Tap *os.File
	MAC string // the guest interface's address, aa:bb:cc:dd:ee:ff
}

// Jail says how the VMM process is confined on the host (our own jailer
// step, as Firecracker's jailer does): run as UID/GID, chrooted in Dir
// (which then holds only the machine's files, each linked in, and the
// sockets), in the cgroup the caller made and in new mount, PID, IPC, UTS
// and network namespaces.
type Jail struct {
	UID, GID int
	// Dir is the per-machine directory, created by the caller, owned by
	// root; the driver links the kernel, initramfs and drives in and
	// creates its sockets there.
	Dir string
	// AddToCgroup, when set, puts the jailed process into the machine's
	// cgroup before anything of the VMM runs.
	AddToCgroup func(pid int) error
}

// MachineConfig is one machine to start.
type MachineConfig struct {
	ID      string
	Kernel  string // host path of the kernel (bzImage)
	Initrd  string // host path of the initramfs
	Cmdline string
	VCPUs   int
	// MemoryMiB is the guest's RAM.
	MemoryMiB int64
	Drives    []Drive
	// AgentPort is the name of the guest's virtio-serial port for the
	// agent (what the guest reads in /sys/class/virtio-ports/*/name).
	AgentPort string
	// ReseedPort, if set, is the name of a second port, where the guest
	// reads fresh entropy the host sends (Machine.Reseed).
	ReseedPort string
	// Console receives the guest's serial console and the VMM's own
	// messages (capped by the caller).
	Console io.Writer
	// Net is the guest's network interface; nil: the guest has no network
	// device at all.
	Net *NetDevice
	// Incoming, when set, is a saved state (Machine.Snapshot's) the
	// machine starts from instead of booting: the rest of the config must
	// give it the devices of the machine that was saved. Start returns
	// once it runs again.
	Incoming *os.File
	Jail     Jail
}

var validID = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_-]{0,63}$`)
var validDriveID = regexp.MustCompile(`^[a-z][a-z0-9-]{0,31}$`)
var validName = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9._-]{0,63}$`)

// Validate checks c.
func (c *MachineConfig) Validate() error {
	if !validID.MatchString(c.ID) {
		return fmt.Errorf("vmm: invalid machine id %q", c.ID)
	}
	for _, p := range []string{c.Kernel, c.Initrd, c.Jail.Dir} {
		if !filepath.IsAbs(p) {
			return fmt.Errorf("vmm: path %q is not absolute", p)
		}
	}
	if c.VCPUs < 1 || c.VCPUs > 64 {
		return fmt.Errorf("vmm: %d vCPUs", c.VCPUs)
	}
	if c.MemoryMiB < 32 {
		return fmt.Errorf("vmm: %d MiB of memory is too little", c.MemoryMiB)
	}
	if !validName.MatchString(c.AgentPort) {
		return fmt.Errorf("vmm: invalid port name %q", c.AgentPort)
	}
	if c.ReseedPort != "" && (!validName.MatchString(c.ReseedPort) || c.ReseedPort == c.AgentPort) {
		return fmt.Errorf("vmm: invalid reseed port name %q", c.ReseedPort)
	}
	seen := map[string]bool{}
	for _, d := range c.Drives {
		if !validDriveID.MatchString(d.ID) || seen[d.ID] {
			return fmt.Errorf("vmm: invalid or repeated drive id %q", d.ID)
		}
		seen[d.ID] = true
		if !filepath.IsAbs(d.Path) || (d.Serial != "" && !validName.MatchString(d.Serial)) {
			return fmt.Errorf("vmm: drive %s: bad path or serial", d.ID)
		}
	}
	if c.Net != nil {
		if c.Net.Tap == nil {
			return errors.New("vmm: a network device needs a tap")
		}
		if hw, err := net.ParseMAC(c.Net.MAC); err != nil || len(hw) != 6 || hw[0]&1 != 0 {
			return fmt.Errorf("vmm: bad unicast MAC %q", c.Net.MAC)
		}
	}
	if c.Jail.UID <= 0 || c.Jail.GID <= 0 {
		return errors.New("vmm: the VMM must run as an unprivileged uid and gid")
	}
	return nil
}
