package session

import (
	"context"

	"github.com/airlockhq/airlock"
)

// attachVolumes claims and mounts the volumes the session asks for, on
// a backend that can bind them.
func (m *Manager) attachVolumes(ctx context.Context, n *newSession, ticket interface{ Backend() airlock.Backend }) error {
	if len(n.req.Volumes) == 0 {
		return nil
	}
	if m.cfg.Volumes == nil {
		return airlock.Problem(airlock.EFORBIDDEN, "volumes-unavailable", "this node keeps no volumes")
	}
	if b := ticket.Backend(); !b.Capabilities().Volumes {
		return airlock.Problem(airlock.EINVALID, "volumes-unsupported-backend",
			"the session was placed on the %s backend, which cannot mount volumes (docs/volumes.md says why); ask for isolation kernel (gvisor) or, for a first-party tenant, container (namespaces)", b.Name()).With("backend", b.Name())
	}
	for _, v := range n.req.Volumes {
		if err := airlock.CheckVolumeMountPoint(n.img.Rootfs, v.Path); err != nil {
			return err
		}
	}
	vs, err := m.cfg.Volumes.Attach(ctx, n.tenant.ID, n.id, n.req.Volumes)
	if err != nil {
		return err
	}
	n.volumes = vs
	return nil
}

// detachVolumes releases the session's volumes (a no-op for a session
// without any).
func (m *Manager) detachVolumes(ctx context.Context, id string) {
	if m.cfg.Volumes == nil {
		return
	}
	if err := m.cfg.Volumes.Detach(context.WithoutCancel(ctx), id); err != nil {
		m.cfg.Logger.Error("release the session's volumes", "session", id, "err", err)
	}
}
