// Package testport hands tests loopback TCP ports for servers that bind
// them later, in another process (airlockd nodes of a fleet, etcd
// members, versitygw, a registry): ports that nothing listens on now and
// that the kernel will not hand out meanwhile.
//
// The usual way, listening on port 0 and closing, picks a port from the
// kernel's ephemeral range, the same range the kernel draws the source
// ports of outgoing connections from: between the close and the server's
// bind, any process's outgoing connection may take it, and the server
// then fails with "address already in use". These ports come from below
// that range instead, where only an explicit bind can take them.
package testport
