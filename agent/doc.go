// Package agent is the program that runs inside every sandbox as its first
// process. It speaks the protocol package's wire format over one byte
// stream (its stdio under runsc) and runs programs (optionally under an
// address-space limit, see RunHelperIfAsked), moves files (walking paths
// with O_NOFOLLOW, see beneath_linux.go), keeps code contexts (persistent
// interpreters, see context.go) and reports health on the host's behalf.
//
// The agent is inside the attacker's box: it enforces nothing the host
// relies on. Limits are the host's (cgroups, runsc, the VMM); the agent's
// own timeouts and checks only make results tidier. It must not import any
// host-side package.
package agent
