package node

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/backend/microvm"
	"github.com/airlockhq/airlock/backend/microvm/qemu"
	"github.com/airlockhq/airlock/backend/namespaces"
	"github.com/airlockhq/airlock/service/image"
)

// extraBackends makes the backends offered besides gVisor (the default):
// with --namespaces, the hardened-container backend, which requests reach
// by asking for isolation "container" and only first-party tenants may
// use. Its cgroups live under <cgroup-parent>-namespaces, apart from
// gVisor's, whose reconciler owns all of its parent. The returned func
// removes the backend's ready disks on the way out.
func extraBackends(o Config, logger *slog.Logger) ([]airlock.Backend, func(), error) {
	var out []airlock.Backend
	if o.MicroVM {
		b, err := microvmBackend(o, logger)
		if err != nil {
			return nil, nil, err
		}
		out = append(out, b)
	}
	if !o.Namespaces {
		return out, func() {}, nil
	}
	b, err := namespaces.New(namespaces.Config{
		StateDir:     filepath.Join(o.StateDir, "namespaces"),
		CgroupParent: o.CgroupParent + "-namespaces",
		Logger:       logger,
	})
	if err != nil {
		return nil, nil, err
	}
	logger.Info("namespaces backend enabled", "landlock_abi", b.LandlockABI())
	return append(out, b), func() {
		if err := b.Close(); err != nil {
			logger.Warn("closing the namespaces backend", "err", err)
		}
	}, nil
}

// microvmBackend makes the microVM backend (--microvm): QEMU microvm
// guests, which requests reach by asking for isolation "vm". Its cgroups
// live under <cgroup-parent>-microvm. The acceleration (kvm or tcg) is
// probed here, logged, and shown in /readyz.
func microvmBackend(o Config, logger *slog.Logger) (*microvm.Backend, error) {
	kdir, err := image.FindKernel(filepath.Join(o.StateDir, "kernel"))
	if err != nil {
		return nil, fmt.Errorf("--microvm: %w", err)
	}
	kernel, err := image.KernelImage(kdir)
	if err != nil {
		return nil, fmt.Errorf("--microvm: %w", err)
	}
	drv, err := qemu.New(context.Background(), qemu.Config{ProbeKernel: kernel, Logger: logger})
	if err != nil {
		return nil, fmt.Errorf("--microvm: %w", err)
	}
	b, err := microvm.New(microvm.Config{
		StateDir:     filepath.Join(o.StateDir, "microvm"),
		BuildGuest:   image.GuestBuilder(image.GuestConfig{StateDir: o.StateDir, KernelDir: kdir}),
		Driver:       drv,
		CgroupParent: o.CgroupParent + "-microvm",
		Logger:       logger,
	})
	if err != nil {
		return nil, err
	}
	logger.Info("microvm backend enabled", "accel", drv.Accel(), "why", drv.AccelReason(), "kernel", kdir)
	return b, nil
}

// microvmAccel is the acceleration of the node's microVM backend, "" if
// it has none.
func microvmAccel(backends []airlock.Backend) string {
	for _, b := range backends {
		if a := b.Capabilities().Accelerator; a != "" {
			return a
		}
	}
	return ""
}
