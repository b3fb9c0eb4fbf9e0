package node

import (
	"context"
	"time"

	"github.com/airlockhq/airlock/service/image"
	"github.com/airlockhq/airlock/service/template"
)

// rootfsUser is a backend that can say which image root filesystems its
// sandboxes on this node use (gVisor's does); image versions are
// collected only when every backend can.
type rootfsUser interface {
	RootfsInUse(ctx context.Context) ([]string, error)
}

// gcLoop runs the garbage collector at start and then every
// Config.ImageGC until ctx ends.
func (n *Node) gcLoop(ctx context.Context) {
	if n.cfg.ImageGC <= 0 {
		return
	}
	t := time.NewTicker(n.cfg.ImageGC)
	defer t.Stop()
	for {
		n.CollectGarbage(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// CollectGarbage removes what nothing references: image versions other
// than the current one of each name that no sandbox of the node runs on
// (only when the node builds its own images: a node given its images
// by another does not own them), template directories without a record
// or a session, base snapshots of deleted templates, cached layers no
// template lists, and the Dockerfile step cache's entries and registry
// images for FROM that no template lists and no build in progress uses,
// idle for a day (template.Collect). It logs what it freed.
func (n *Node) CollectGarbage(ctx context.Context) {
	start := time.Now()
	var dirs []string
	var freed int64
	if n.parts.images == nil && n.cfg.BuildImages {
		if used, ok := n.rootfsInUse(ctx); ok {
			c, err := n.Images.Collect(ctx, image.CollectConfig{InUse: used})
			if err != nil {
				n.logger.Error("garbage collection of image versions", "err", err)
			}
			if c != nil {
				dirs, freed = append(dirs, c.Removed...), freed+c.FreedBytes
			}
		}
	}
	if n.Templates != nil {
		c, err := template.Collect(ctx, template.CollectConfig{
			StateDir: n.cfg.StateDir, Store: n.Store, SnapshotDir: n.Provisioner.SnapshotDir(), Building: n.Templates.Building,
		})
		if err != nil {
			n.logger.Error("garbage collection of templates", "err", err)
		}
		if c != nil {
			dirs, freed = append(dirs, c.Removed()...), freed+c.FreedBytes
		}
	}
	if len(dirs) > 0 {
		n.logger.Info("garbage collected unreferenced images, templates and layers", "removed", dirs, "freed_bytes", freed,
			"freed", image.HumanSize(freed), "took", time.Since(start).Round(time.Millisecond))
	} else {
		n.logger.Debug("garbage collection found nothing to remove", "took", time.Since(start).Round(time.Millisecond))
	}
}

// rootfsInUse is every rootfs the node's sandboxes and pool use; false
// when a backend cannot tell (nothing is then collected of images).
func (n *Node) rootfsInUse(ctx context.Context) ([]string, bool) {
	used := n.Provisioner.RootfsInUse()
	for _, b := range n.Backends {
		u, ok := b.(rootfsUser)
		if !ok {
			n.logger.Debug("image versions not collected: a backend cannot tell which it uses", "backend", b.Name())
			return nil, false
		}
		r, err := u.RootfsInUse(ctx)
		if err != nil {
			n.logger.Error("image versions not collected: the rootfs in use could not be read", "backend", b.Name(), "err", err)
			return nil, false
		}
		used = append(used, r...)
	}
	return used, true
}
