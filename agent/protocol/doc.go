// Package protocol is the one protocol between the host and the agent that
// runs inside every sandbox. It runs over any reliable byte stream: the
// stdio pipes of runsc, a unix socket, vsock or virtio-serial.
//
// The wire is a sequence of frames. Each frame is a 9-byte header (type,
// stream ID, payload length, all big-endian) and a payload of at most
// MaxPayload bytes. The host opens streams (one per request) with odd IDs
// chosen by itself; control payloads are JSON, data payloads raw bytes.
//
// A connection ends; the sandbox need not. The host may give the agent a
// channel (OpChannel, channel.go): a unix socket path to dial, with a
// token the agent sends in the Hello of every connection it dials. Execs
// with RetainBytes outlive their connection and are listed and read
// again with OpProcesses and OpAttach (processes.go); code contexts are
// listed with OpContextList.
//
// The host treats everything the agent says as hostile: frame sizes are
// bounded before allocation, JSON is decoded into fixed types and checked
// by Validate, and any violation ends the connection. This package
// owns the wire format, the message types (those the airlock.Agent
// interface takes and returns are the domain's, aliased here), the
// host-side Client (which implements airlock.Agent) and the
// agent-side frame helpers; it must not know about sandboxes or backends.
package protocol
