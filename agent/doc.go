// Package agent is the program that runs inside every sandbox as its first
// process. It speaks the protocol package's wire format over one byte
// stream (its stdio under runsc) and runs programs (optionally under an
// address-space limit, see RunHelperIfAsked), moves files (walking paths
// with O_NOFOLLOW, see beneath_linux.go), keeps code contexts (persistent
// interpreters, see context.go) and reports health on the host's behalf.
//
// Its state is split in two: a server is one host connection (its streams
// end with it); the core is what outlives connections: programs started
// with RetainBytes (processes.go), code contexts, warm runtimes and the
// channel. Run serves the first stream (stdio) and then, once the host
// has set a channel, dials it again whenever a connection ends, so a
// sandbox outlives the host process that started it (channel.go).
//
// The agent is inside the attacker's box: it enforces nothing the host
// relies on. Limits are the host's (cgroups, runsc, the VMM); the agent's
// own timeouts and checks only make results tidier. It must not import any
// host-side package.
package agent
