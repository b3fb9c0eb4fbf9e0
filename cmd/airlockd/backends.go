package main

import (
	"log/slog"
	"path/filepath"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/namespaces"
)

// extraBackends makes the backends offered besides gVisor (the default):
// with --namespaces, the hardened-container backend, which requests reach
// by asking for isolation "container" and only first-party tenants may
// use. Its cgroups live under <cgroup-parent>-namespaces, apart from
// gVisor's, whose reconciler owns all of its parent. The returned func
// removes the backend's ready disks on the way out.
func extraBackends(o options, logger *slog.Logger) ([]airlock.Backend, func(), error) {
	if !o.namespaces {
		return nil, func() {}, nil
	}
	b, err := namespaces.New(namespaces.Config{
		StateDir:     filepath.Join(o.stateDir, "namespaces"),
		CgroupParent: o.cgroupParent + "-namespaces",
		Logger:       logger,
	})
	if err != nil {
		return nil, nil, err
	}
	logger.Info("namespaces backend enabled", "landlock_abi", b.LandlockABI())
	return []airlock.Backend{b}, func() {
		if err := b.Close(); err != nil {
			logger.Warn("closing the namespaces backend", "err", err)
		}
	}, nil
}
