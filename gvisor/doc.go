// Package gvisor is the gVisor backend: it runs each sandbox with runsc on
// the systrap platform, from an OCI bundle built with the OCI runtime-spec
// types, with the agent as the container's first process speaking the
// agent protocol over the stdio pipes of `runsc run`.
//
// Every limit is applied outside the sandbox: memory and CPU through a host
// cgroup the backend creates (and reads back for stats), the process count
// as RLIMIT_NPROC enforced by the gVisor kernel, disk through a size-capped
// host tmpfs that backs /workspace and /tmp, and wall time by the caller
// destroying the sandbox. The package owns the runsc state directory, the
// per-sandbox run directories and the cgroups under its parent; it must not
// touch anything else on the host.
package gvisor
