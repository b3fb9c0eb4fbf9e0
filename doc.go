// Package airlock holds the domain of the Airlock code-execution service:
// the types every other package speaks (executions, tenants, API keys,
// artifacts, images, limits), the interfaces that implementations satisfy
// (Backend, Sandbox, Store, Blobs) and the one error type with its codes.
//
// It must not import any implementation package: backend/gvisor, store/sqlite, blob/disk,
// api/rest and the rest depend on it, never the other way round.
//
// # Backends
//
// A Backend turns an Image and Limits into a running sandbox. The
// contract, method by method: Create makes a sandbox from an image and
// starts it (Snapshotter.Restore, where the backend implements it, makes
// one from a snapshot); Sandbox.Agent runs programs with streamed output,
// stdin and signals, and moves files, over the agent protocol;
// WorkspaceDir is the host's view of /workspace; Stats, Stop, Done and
// Destroy; Reconcile recovers after a restart by ending whatever an
// earlier server left that no Sandbox value of this one holds. A backend
// that implements Reattacher (gVisor) runs sandboxes that outlive
// the server: Reattacher.Reattach takes one back by ID after a restart,
// Detacher.Detach lets go of one at a clean stop. Whatever the code
// inside does, a backend guarantees:
//
//   - Isolation. The code cannot read or change anything of the host or
//     of another sandbox; it runs as uid 1000 with no capabilities and
//     no_new_privs, sees only its own processes, and has no network but
//     loopback. Its writable places are /workspace, /tmp and /dev/shm,
//     fresh for every sandbox.
//   - Limits enforced outside the sandbox: memory (over it the OOM killer
//     ends the program or the sandbox, and Stats reports OOMKilled),
//     CPU, processes (fork fails with EAGAIN), disk and inodes (ENOSPC)
//     and open files (EMFILE). Wall time is the caller's: the agent kills
//     at the deadline and the host destroys the sandbox after.
//   - The agent is untrusted: Create returns once it has said hello, and
//     nothing it says is believed beyond the protocol's checks.
//   - WorkspaceDir is a file system of its own (no hard link reaches out
//     of it), hostile (never follow its links), and still once Stop has
//     returned: nothing inside can change it any more.
//   - Stop ends every process of the sandbox and waits for them; Done is
//     closed when the sandbox ended on its own; Destroy, idempotent,
//     removes everything the sandbox held on the host: processes, mounts,
//     cgroups, network namespaces, run directories.
//   - Capabilities describe the backend and the manager decides from
//     them, never from Name: Capabilities.Isolation is what the tenant
//     policy (ChooseBackend) compares with a tenant's floor.
//
// Every backend runs the suite of package conformance in its tests and
// passes it; the cases that need a separate kernel are skipped only by a
// backend whose Capabilities say SeparateKernel: false, with that reason.
package airlock
