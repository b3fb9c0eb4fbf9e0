// Package session runs sessions: long-lived sandboxes of a tenant that
// take many calls (exec, files, code contexts) until their timeout, their
// idle timeout or a DELETE, and are then destroyed like any other sandbox.
//
// It owns the session lifecycle (the airlock.SessionState machine, with
// every move checked by SessionState.Transition and recorded in the
// SessionStore), idempotent creation (a store-level unique key per tenant
// and Idempotency-Key, and waiting for the first creator), admission
// (sessions per node and per tenant), the reaper (timeouts and idle
// timeouts), and what a restarted server does with the sessions an earlier
// run left (Recover: they are ended and recorded as server_restarted; see
// Recover for why they are not reattached).
//
// It speaks only to the domain interfaces (airlock.Backend, ImageResolver,
// Store, SessionStore) and to the agent through protocol.Client; it must
// not know which backend or store it drives, and must not touch the
// one-shot execution manager or its warm pool.
package session
