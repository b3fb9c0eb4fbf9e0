package node

import (
	"path/filepath"

	"github.com/airlockhq/airlock/service/quota"
	"github.com/airlockhq/airlock/service/session"
	"github.com/airlockhq/airlock/service/volume"
)

// newVolumes makes the node's volumes, under the state directory, with
// the tenants' volume_bytes quota; their snapshots are sealed with the
// keys, blob store and quota of workspace snapshots (keep, off without a
// master key).
func (n *Node) newVolumes(keep session.KeepConfig) (*volume.Service, error) {
	c := n.cfg
	nodeID := ""
	if c.Fleet.enabled() {
		nodeID = c.Fleet.NodeID
	}
	var snaps volume.SnapshotConfig
	if keep.Store != nil {
		snaps = volume.SnapshotConfig{Keys: keep.Keys, Blobs: keep.Blobs, Used: keep.Store.SnapshotBytes, QuotaBytes: keep.SnapshotQuotaBytes}
	}
	return volume.New(volume.Config{
		Store: n.Store,
		Dir:   filepath.Join(c.StateDir, "volumes"),
		Node:  nodeID,
		QuotaBytes: func(tenantID string) int64 {
			return n.Quotas.Limits(tenantID)[quota.VolumeBytes]
		},
		Snapshots: snaps,
		Logger:    n.logger,
	})
}
