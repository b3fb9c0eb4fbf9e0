// Package fleet runs many airlockd nodes as one service on etcd.
//
// It owns, under one etcd key prefix (Config.Prefix, "/airlock/" by
// default):
//
//	nodes/<node>            a node's record (Node) under its lease: address,
//	                        incarnation, isolation tiers, capacity, load
//	alloc/<node>/<id>       a reservation of capacity on a node (Reservation),
//	                        under that node's lease
//	sessions/<session>      which node holds a session (and its reservation),
//	                        under that node's lease
//	reaper                  the election of the node that marks lost nodes'
//	                        sessions
//
// and the pieces that use them, one file each: membership (register under
// a lease, renew, publish load; adopt the lease again after a quick
// restart), placement (best-of-K over live nodes that offer the tier,
// preferring the nodes that hold the request's template and keeping a
// request that mounts a volume to the volume's node: Affinity),
// reservation (an etcd transaction whose mod-revision compares refuse
// any reservation another placer made meanwhile, so no node is
// overcommitted), sessionmap (a watch cache from session ID to node),
// forward (the HTTP front: authenticate, place, reverse-proxy, stream),
// sign (every forward signed: an HMAC over method, target, time, nonce
// and body, replays refused), transport (forwards dial only the
// configured node ranges), etcd (the client's TLS and user) and reaper (the
// elected node marks a lost node's sessions lost and fails its runs; a
// node that lost its own lease destroys the sandboxes the fleet no longer
// assigns it).
//
// Membership, liveness, elections and atomic updates are etcd's (leases,
// the concurrency package, transactions); nothing here is a consensus or
// membership protocol of its own.
//
// It must not touch sandboxes, the store's schema or the HTTP API's
// handlers: it reaches the node through the small Local and Store
// interfaces and the local http.Handler it wraps. Without a fleet (no
// --etcd) airlockd never makes one and nothing here runs.
package fleet
