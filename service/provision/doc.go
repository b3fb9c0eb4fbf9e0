// Package provision hands out sandboxes on one node. It is the one place
// that decides, for one-shot runs and sessions alike:
//
//   - which backend serves a request: airlock.ChooseBackend with the
//     tenant's isolation floor, for every caller (Admit);
//   - whether the node and the tenant have room: the tenant's quotas
//     first (Config.Quotas, package quota: a refusal holds nothing), then
//     one-shot slots with a per-tenant share and live sessions per node
//     (Admit); session execs and cells count against the tenant's
//     executions per minute (AdmitExec);
//   - which base snapshots are kept: none that holds a credential (the
//     sandbox's environment and the checkpoint's files are scanned with
//     internal/secretscan before a snapshot is used; a refused key boots
//     cold);
//   - how the sandbox is obtained: a ready member of the warm pool, a
//     restore of the image's base snapshot, or a cold boot; with a
//     network, a boot into a network namespace the node's egress made for
//     it (Ticket.Acquire);
//   - how it ends: destroyed in the background with its network
//     (Lease.Release, Lease.Destroy), or, at a clean stop that keeps
//     sessions, left running for the next start (Lease.Detach);
//   - what a restarted server does with what an earlier one left:
//     sessions' sandboxes are reattached by ID (Provisioner.Reattach),
//     everything else is ended (Provisioner.Reconcile).
//
// A Lease is held by exactly one one-shot run or one session, then the
// sandbox is destroyed: no sandbox is ever handed out twice.
//
// It speaks only to the domain interfaces (airlock.Backend, Snapshotter,
// Reattacher, Egress); it must not know which backend it drives, and it
// does not run programs (package run does) or keep records of executions.
package provision
