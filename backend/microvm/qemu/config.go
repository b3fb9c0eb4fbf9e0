package qemu

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/airlockhq/airlock/backend/microvm/vmm"
)

// Config configures the driver.
type Config struct {
	// QEMU is qemu-system-x86_64; empty: from PATH. It must live under
	// /usr (the jail binds /usr read-only and nothing else of the host).
	QEMU string
	// Jailer is the binary that runs package jailer (it calls
	// jailer.RunIfAsked first thing); empty: this process's own.
	Jailer string
	// Accel forces an acceleration; empty: Probe decides, booting
	// ProbeKernel.
	Accel       vmm.Accel
	ProbeKernel string
	// StartTimeout bounds a start to the VMM's monitor answering.
	StartTimeout time.Duration
	Logger       *slog.Logger
}

// Validate fills defaults and checks c.
func (c *Config) Validate() error {
	if c.QEMU == "" {
		p, err := exec.LookPath("qemu-system-x86_64")
		if err != nil {
			return errors.New("qemu: qemu-system-x86_64 not found; scripts/setup.sh installs Debian's qemu-system-x86")
		}
		c.QEMU = p
	}
	if p, err := filepath.EvalSymlinks(c.QEMU); err == nil {
		c.QEMU = p
	}
	if !strings.HasPrefix(c.QEMU, "/usr/") {
		return fmt.Errorf("qemu: %s is not under /usr, the only host tree the jail holds", c.QEMU)
	}
	if c.Jailer == "" {
		self, err := os.Executable()
		if err != nil {
			return err
		}
		c.Jailer = self
	}
	if c.StartTimeout == 0 {
		c.StartTimeout = 30 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	switch c.Accel {
	case "", vmm.AccelKVM, vmm.AccelTCG:
	default:
		return fmt.Errorf("qemu: unknown acceleration %q", c.Accel)
	}
	if c.Accel == "" && c.ProbeKernel == "" {
		return errors.New("qemu: a kernel to probe KVM with, or a fixed acceleration, is required")
	}
	return nil
}

// Driver starts QEMU microvm machines.
type Driver struct {
	cfg    Config
	accel  vmm.Accel
	why    string
	tscKHz int64
}

var _ vmm.Driver = (*Driver)(nil)

// New validates cfg, chooses the acceleration (probing KVM unless told)
// and logs the choice.
func New(ctx context.Context, cfg Config) (*Driver, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	d := &Driver{cfg: cfg, accel: cfg.Accel, why: "configured"}
	if d.accel == "" {
		d.accel, d.why = Probe(ctx, cfg.QEMU, cfg.ProbeKernel)
	}
	if d.accel == vmm.AccelTCG {
		d.tscKHz = hostTSCKHz()
	}
	cfg.Logger.Info("qemu microvm acceleration", "accel", d.accel, "why", d.why, "tsc_khz", d.tscKHz)
	return d, nil
}

// Name of the VMM.
func (d *Driver) Name() string { return "qemu" }

// Accel is the acceleration the driver's machines use.
func (d *Driver) Accel() vmm.Accel { return d.accel }

// AccelReason says why Accel was chosen.
func (d *Driver) AccelReason() string { return d.why }

// hostTSCKHz is the host's TSC frequency, which a TCG guest's TSC runs
// at; 0 if unknown.
func hostTSCKHz() int64 {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if ok && strings.TrimSpace(k) == "cpu MHz" {
			var mhz float64
			if _, err := fmt.Sscanf(strings.TrimSpace(v), "%g", &mhz); err == nil && mhz > 0 {
				return int64(mhz * 1000)
			}
		}
	}
	return 0
}
