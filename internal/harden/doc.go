// Package harden holds the confinement steps a sandbox's first process
// applies to itself before it runs the agent: the seccomp-bpf allow-list
// of system calls and the dropping of every capability. The namespaces
// backend's init stage (backend/namespaces/nsinit) and the microVM
// guest's init (backend/microvm/guest) both use it, so neither backend
// imports the other.
//
// It runs inside the sandbox, before any untrusted code: it imports no
// host-side package.
package harden
