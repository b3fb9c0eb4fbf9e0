// Package manager runs executions on one node: it validates a request,
// records it, takes a fresh sandbox from the backend, hands the code to the
// agent, enforces the wall-time limit, caps output, collects the files the
// code made, destroys the sandbox and writes the result. It also holds the
// reconciler that cleans up after a crash at start.
//
// It speaks only to the domain interfaces (airlock.Backend, Store, Blobs,
// ImageResolver); it must not know which backend or store it drives.
package manager
