// Package gvisor is the gVisor backend: it runs each sandbox with runsc on
// the systrap platform, from an OCI bundle built with the OCI runtime-spec
// types, with the agent as the container's first process speaking the
// agent protocol over the stdio pipes it was started with.
//
// Sandboxes run detached (`runsc run --detach`, `runsc restore --detach`):
// they do not depend on the process that started them, so they outlive a
// crash or a restart of airlockd. When airlockd's ends of the stdio pipes
// go away, the agent keeps running and dials a unix socket in a host
// directory of the sandbox's own, bind-mounted read-only at /run/airlock
// (runsc --host-uds=open); Reattach listens there and takes the agent that
// proves itself with the sandbox's token (channel.go). While airlockd
// lives it is the sandboxes' parent (a child subreaper) and reaps them
// (process_linux.go).
//
// Every limit is applied outside the sandbox: memory and CPU through a host
// cgroup the backend creates (and reads back for stats), the process count
// as RLIMIT_NPROC enforced by the gVisor kernel, disk through a size-capped
// loop-mounted ext4 file system that backs /workspace and /tmp, and wall
// time by the caller destroying the sandbox. The package owns the runsc
// state directory, the per-sandbox run directories and the cgroups under
// its parent, and the format of a paused sandbox (pause.go,
// pausearchive.go) in a directory its caller names; it must not touch
// anything else on the host.
package gvisor
