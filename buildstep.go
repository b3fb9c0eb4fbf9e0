package airlock

import (
	"context"
	"io"
)

// BuildStep is one RUN step of a template build: a program run once, as
// root or the step's user, in a fresh sandbox whose root filesystem is
// Rootfs, mounted read-write so that what the program writes is the
// step's result. Rootfs is a directory the builder prepared for this step
// alone (an overlay over the cached results of the steps before it).
type BuildStep struct {
	ID     string   // unique, safe as a file name
	Rootfs string   // host path, writable, used by this step only
	Args   []string // argv; Args[0] is looked up in the rootfs's PATH by the shell form's /bin/sh
	Env    []string // KEY=VALUE
	Cwd    string   // absolute path in the rootfs; it exists
	UID    uint32
	GID    uint32
	Limits Limits // CPUs, MemoryBytes, Pids and Timeout are applied
	// Network, when set, puts the step's sandbox in a network the node's
	// egress made for it (NetworkAttachment.Sandbox); nil: no network.
	Network *SandboxNetwork
	// Output receives the program's stdout and stderr, interleaved.
	Output io.Writer
}

// BuildRunner runs build steps in sandboxes. The gvisor backend
// implements it: a step's program runs under runsc with no network
// unless the step names one.
type BuildRunner interface {
	// RunBuildStep runs the step to its end and returns its exit status.
	// An error means the step could not be run (or was cancelled), not
	// that the program failed.
	RunBuildStep(ctx context.Context, step BuildStep) (exitCode int, err error)
}
