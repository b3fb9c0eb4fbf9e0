// Package egress is the node's egress control for sandboxes with a
// network: it makes each sandbox's network namespace (through
// internal/netns), runs the one transparent proxy every TCP connection of
// every sandbox is redirected to and the one resolver their DNS is
// redirected to, enforces each sandbox's allow list, quota and live policy
// there, and writes the audit log of every connection and query.
//
// The proxy never decrypts TLS and never trusts the address a sandbox
// dialled: it decides on the ClientHello's server name (TLS), the Host
// header (HTTP) or, for other protocols, the name the sandbox's own
// resolver answered the dialled address for, and connects to the name's
// addresses as it resolves them itself, refusing any in a forbidden range
// (private, loopback, link-local and metadata, CGNAT, multicast and the
// other special-purpose ranges). The resolver answers only names the allow
// list admits and never sends another name upstream.
//
// It must not touch sandboxes or their backends (a session or execution
// attaches a network and starts its sandbox in it), and it knows the
// credential broker only as an airlock.Broker it hands the broker's
// connections to.
package egress
