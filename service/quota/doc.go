// Package quota keeps the tenants' quotas on one node: what each tenant
// may hold at once (sessions, one-shot runs, vCPU and memory, the sums
// of its live sandboxes' limits), how fast it may start work (executions
// per minute: one-shot runs, session execs and cells) and what it may
// use in a UTC day (sandbox-seconds, egress bytes).
//
// A Ledger answers every check from memory: the operator's defaults
// (Config.Defaults), the per-tenant overrides (read from the store at
// Start and again every flush), the holds of live sandboxes and the day's
// counters. The day's counters are written behind to the store
// (airlock.QuotaStore): soon after a sandbox ends, and every
// FlushInterval for the time of sandboxes still alive and the egress
// bytes moved meanwhile, so a restart keeps them; a crash loses at most
// what was counted since the last write (see Config.FlushInterval).
//
// Over a quota, a check answers a 429 problem (airlock.ERATELIMITED)
// whose extension members name the quota, its limit, the use and its
// unit, with Retry-After: when a held sandbox is expected to end, when
// the minute's oldest execution leaves the window, or the next UTC
// midnight. A refused check holds nothing.
//
// It does not make, run or end sandboxes (package provision calls it as
// it admits and releases them), and it does not cut connections (package
// egress asks it what a tenant may still move and cuts them itself).
package quota
