package node

import (
	"path/filepath"

	"github.com/airlockhq/airlock/service/quota"
	"github.com/airlockhq/airlock/service/volume"
)

// newVolumes makes the node's volumes, under the state directory, with
// the tenants' volume_bytes quota.
func (n *Node) newVolumes() (*volume.Service, error) {
	c := n.cfg
	nodeID := ""
	if c.Fleet.enabled() {
		nodeID = c.Fleet.NodeID
	}
	return volume.New(volume.Config{
		Store: n.Store,
		Dir:   filepath.Join(c.StateDir, "volumes"),
		Node:  nodeID,
		QuotaBytes: func(tenantID string) int64 {
			return n.Quotas.Limits(tenantID)[quota.VolumeBytes]
		},
		Logger: n.logger,
	})
}
