// Package netns makes and removes the host plumbing of a sandbox's
// network: a named network namespace (a bind-mounted nsfs file), a veth
// pair with one end in it, addresses and a default route, and the
// nftables rules (programmed over netlink with google/nftables) that give
// the namespace exactly one way out: every TCP connection is redirected to
// the node's egress proxy and DNS (UDP and TCP 53) to its resolver;
// everything else (other UDP, ICMP, IPv6, spoofed sources, link-local and
// metadata addresses) is dropped and counted.
//
// Every name it makes starts with its Config.Prefix, which is how
// Reconcile finds what a crashed process left. It must not touch links,
// namespaces or nftables tables without that prefix. It knows nothing of
// sessions, policies or the proxy: package egress decides, this package
// wires.
package netns
