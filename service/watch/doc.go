// Package watch lets a session be watched: it wraps an
// airlock.SessionService (New) so that the output of every exec and cell
// run through it is also published, as it happens, to whoever watches the
// session (airlock.SessionWatcher; GET /v1/sessions/{id}/output, which the
// web console reads to show a running command).
//
// It owns the hub: per session, the runs under way with the last of their
// output (for a watcher that comes late) and the watchers, each with a
// bounded queue. Publishing never blocks the caller (the observer
// callbacks run on the goroutine that pumps the agent's frames): a
// watcher whose queue is full is dropped (airlock.ErrWatchDropped), the
// run goes on.
//
// It must not change what the wrapped service does: every call is passed
// through unchanged, with an observer that also feeds the hub, and the
// results and errors are the wrapped service's. It adds no record; the
// wrapped service records every exec and cell as before. Programs adopted
// after a restart of airlockd, which no call of this process started, are
// not seen.
package watch
