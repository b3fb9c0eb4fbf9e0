// Package quota keeps the tenants' quotas of a node or of a fleet: what each tenant
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
// In a fleet the ledger has a Shared (EtcdCounters): the holds of live
// sandboxes and the executions of the last minute are then the whole
// fleet's, kept in etcd (holds under the node's lease, so a dead node's
// go with it), and each check reads and writes them in one transaction;
// the day's counters are read back from the shared store at every flush.
// A node that cannot reach them refuses new work (503 quota-unavailable)
// rather than count alone.
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
