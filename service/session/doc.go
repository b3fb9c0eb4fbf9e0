// Package session runs sessions: long-lived sandboxes of a tenant that
// take many calls (exec, files, code contexts) until their timeout, their
// idle timeout or a DELETE, and are then destroyed like any other sandbox.
//
// It is a front-end over the node's one sandbox lifecycle: package
// provision chooses the backend within the tenant's isolation floor,
// admits the session (per node and per tenant), and gets its sandbox from
// the warm pool, a snapshot or a boot; package run runs and records its
// execs and cells (deadline, kill, caps, exit, stats). What it owns is
// what only sessions have: the lifecycle (the airlock.SessionState
// machine, every move checked by SessionState.Transition and recorded in
// the SessionStore), idempotent creation (a store-level unique key per
// tenant and Idempotency-Key, waiting for the first creator), files and
// code contexts, the reaper (timeouts and idle timeouts), letting go of
// sessions at a clean stop (Detach) and taking them back at the next
// start (Recover: reattached by ID, their running programs adopted), and
// keeping sessions (keep.go, fork.go, memsnap.go): sealed snapshots of a
// workspace or a whole sandbox, pause and resume (a paused session is its
// record and a directory under KeepConfig.PauseDir, which it owns), and
// fork.
//
// It speaks only to the domain interfaces, provision, run and the agent
// through protocol.Client; it must not know which backend or store it
// drives.
package session
