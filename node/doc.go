// Package node assembles one Airlock node, as Nomad's agent does: from a
// Config it locks the state directory, opens the metadata store and the
// blobs, makes the backends (gVisor, and the namespaces and microVM
// backends when asked), the quotas, the abuse monitor, the egress proxy
// and its broker, the provisioner, the runner, the one-shot and session
// managers, joins the fleet when one is named, recovers what an earlier
// run left, and serves the front ends (REST, MCP, console, E2B) on one
// listener. airlockd fills the Config from its flags; tests build a node
// in-process the same way.
//
// One file per concern: config.go (the Config and its checks), store.go,
// blobs.go, backends.go, services.go, quotas.go, abuse.go, egress.go,
// keep.go, sessions.go, fleet.go, recover.go, frontends.go, e2b.go, and
// node.go (New, Run and the shutdown order: everything is closed in the
// reverse order of its making).
//
// The node owns nothing of the domain: it only wires the packages that
// do. It must not parse flags or read the environment beyond what its
// parts document (the master key and the object store's credentials).
package node
