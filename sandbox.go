package airlock

import (
	"context"
	"errors"
	"time"
)

// Limits bound one sandbox. Every one is enforced outside the sandbox (by
// the host kernel, runsc or the VMM); the agent inside only cooperates.
type Limits struct {
	CPUs        float64       `json:"cpus"`
	MemoryBytes int64         `json:"memory_bytes"`
	DiskBytes   int64         `json:"disk_bytes"`
	Pids        int64         `json:"pids"`
	Timeout     time.Duration `json:"timeout"`
	OutputBytes int64         `json:"output_bytes"` // per stream
}

// DefaultLimits are the limits of a one-shot execution unless the operator
// config says otherwise.
var DefaultLimits = Limits{
	CPUs:        1,
	MemoryBytes: 512 << 20,
	DiskBytes:   500 * 1000 * 1000,
	Pids:        256,
	Timeout:     30 * time.Second,
	OutputBytes: 1 << 20,
}

// SandboxSpec says what sandbox to create.
type SandboxSpec struct {
	ID     string // unique, chosen by the caller; safe as a file name
	Image  *Image
	Limits Limits
	// Labels are kept with the sandbox so the reconciler can tell whose it
	// was after a crash (for example the execution ID).
	Labels map[string]string
	// Network, when set, runs the sandbox's network stack in the given
	// namespace (made by the node's Egress) instead of no network at all.
	// Only backends whose Capabilities list NetworkAllowList take it.
	Network *SandboxNetwork
	// Volumes are host directories (volumes mounted by the node) to bind
	// into the sandbox. Such a sandbox is booted, never taken from a
	// pool or restored.
	Volumes []SandboxVolume
}

// Capabilities describes facts about a backend that no interface
// expresses; the manager consults them instead of switching on backend
// names. Isolation() derives the backend's isolation level from them.
// What a backend can do beyond Backend is said by the optional
// interfaces it implements (Snapshotter, Pauser, Reattacher, ...), and
// only by them: see FeaturesOf.
type Capabilities struct {
	HardwareIsolation bool
	NetworkModes      []string
	RequiresRoot      bool
	SeparateKernel    bool // the sandbox does not share the host kernel's syscall surface
	// Accelerator is how a microVM backend's guests run: "kvm" on
	// hardware virtualisation, "tcg" emulated by QEMU (slow, the same
	// isolation); empty for other backends.
	Accelerator string
	// Volumes says the backend binds SandboxSpec.Volumes into its
	// sandboxes.
	Volumes bool
}

// Features are the optional abilities of a backend, read from the
// interfaces it implements: they are never declared apart from them.
type Features struct {
	Snapshot     bool // Snapshotter: checkpoint a sandbox, restore new ones from it
	Pause        bool // Pauser: save a sandbox on this node and resume it later
	PauseCopy    bool // a Pauser and PauseCopier: resume several sandboxes from one pause (fork)
	PauseArchive bool // a Pauser and PauseArchiver: a pause as one stream (memory snapshots)
	// Reattach: sandboxes outlive the server process, and a new server
	// finds them by ID and talks to their agents again (the backend
	// implements Reattacher, its sandboxes Detacher).
	Reattach bool
}

// FeaturesOf says which optional interfaces b implements.
func FeaturesOf(b Backend) Features {
	_, snap := b.(Snapshotter)
	_, pause := b.(Pauser)
	_, pcopy := b.(PauseCopier)
	_, parch := b.(PauseArchiver)
	_, reattach := b.(Reattacher)
	return Features{
		Snapshot:     snap,
		Pause:        pause,
		PauseCopy:    pause && pcopy,
		PauseArchive: pause && parch,
		Reattach:     reattach,
	}
}

// Backend creates sandboxes: gvisor (a separate kernel in user space)
// and namespaces (a hardened container on the host's kernel) implement
// it. What every backend guarantees is in the package doc (Backends) and
// checked by package conformance.
type Backend interface {
	Name() string
	Capabilities() Capabilities
	// Create makes and starts a sandbox and returns once its agent has
	// answered. On error nothing of the sandbox is left behind.
	Create(ctx context.Context, spec SandboxSpec) (Sandbox, error)
	// Reconcile ends every sandbox of this backend that no live Sandbox
	// value owns: those a crashed server left. It returns their IDs.
	Reconcile(ctx context.Context) ([]string, error)
}

// Sandbox is one running sandbox. It is never reused: after Destroy it is
// gone with everything it held.
type Sandbox interface {
	ID() string
	// Agent is the connection to the agent inside the sandbox. Everything
	// it says is untrusted.
	Agent() Agent
	// WorkspaceDir is the host path of the sandbox's /workspace, readable
	// by the host for artifact collection. Contents are hostile. A
	// backend whose sandboxes' files live in a guest (microvm) fills it
	// only once Stop has returned; before, it may be empty or missing.
	WorkspaceDir() string
	// Stats reports resource use so far, read from outside the sandbox.
	Stats(ctx context.Context) (Stats, error)
	// Stop ends every process in the sandbox and waits until they are
	// gone; the workspace stays readable until Destroy. Artifacts are
	// collected after Stop, so nothing inside can change them meanwhile.
	Stop(ctx context.Context) error
	// Done is closed when the sandbox has exited on its own (for example
	// killed by the OOM killer).
	Done() <-chan struct{}
	// Destroy kills everything in the sandbox and removes every host
	// resource it held. It is safe to call more than once.
	Destroy(ctx context.Context) error
}

// Prober is implemented by sandboxes that can tell cheaply, without a
// round trip to the agent, whether they can still serve. A pool checks a
// member with it before handing the member out.
type Prober interface {
	// Alive returns nil while the sandbox's processes run and its agent's
	// connection is open, else an error wrapping ErrSandboxGone.
	Alive() error
}

// Reattacher is implemented by backends whose sandboxes outlive the
// server. The sandboxes of such a backend do not depend on the server
// process: their agents keep running when it dies and wait for a host to
// connect again.
type Reattacher interface {
	// Reattach finds the running sandbox id that this backend started
	// (in this or an earlier server process) and connects to its agent
	// again. An error means the sandbox is gone or does not answer; the
	// caller then ends it (Reconcile removes what is left).
	Reattach(ctx context.Context, id string) (Sandbox, error)
}

// Detacher is implemented by sandboxes that can outlive the server.
type Detacher interface {
	// Detach closes the host's connection to the agent and forgets the
	// sandbox without ending it, so that a later server start can
	// Reattach it. Programs that asked to be retained keep running.
	Detach() error
}

// ErrCannotDetach is returned by a Detach of a sandbox whose backend
// cannot leave it running without the server.
var ErrCannotDetach = errors.New("the sandbox cannot outlive the server")

// Labeled is implemented by sandboxes that can report the labels they
// were created with (kept on the host, so a reattached sandbox has them).
type Labeled interface {
	Labels() map[string]string
}

// EnvReporter is implemented by sandboxes that can say the environment
// their first process (the agent) was started with: for runsc, the OCI
// spec's. What a sandbox is given is scanned for credentials before a
// snapshot of it is kept.
type EnvReporter interface {
	Env() []string
}

// Stats is a sandbox's resource use, measured on the host.
type Stats struct {
	PeakMemoryBytes int64
	MemoryBytes     int64
	OOMKilled       bool
	CPUTime         time.Duration
	Pids            int64
	// PidsLimitHits counts forks the host's process limit of the
	// sandbox refused (the pids cgroup's max events).
	PidsLimitHits int64
	// MemoryLimitHits counts the times the sandbox's memory reached its
	// limit on the host (the kernel then reclaimed, or gVisor's kernel
	// killed a process inside, or the OOM killer ended the sandbox).
	MemoryLimitHits int64
}

// Snapshotter is implemented by backends that can snapshot: a running sandbox can be saved and new sandboxes restored from
// the save. Each restored sandbox is a new sandbox (fresh workspace, its
// own host resources) that continues the saved processes.
type Snapshotter interface {
	// Checkpoint saves sb into dir (which must not exist) and ends sb.
	Checkpoint(ctx context.Context, sb Sandbox, dir string) error
	// Restore starts a new sandbox from a checkpoint directory. spec must
	// have the image and limits of the checkpointed sandbox.
	Restore(ctx context.Context, spec SandboxSpec, dir string) (Sandbox, error)
	// SnapshotVersion changes whenever checkpoints made before can no
	// longer be restored (a new runtime binary, say).
	SnapshotVersion() string
}
