// Package airlock holds the domain of the Airlock code-execution service:
// the types every other package speaks (executions, tenants, API keys,
// artifacts, images, limits), the interfaces that implementations satisfy
// (Backend, Sandbox, Store, Blobs) and the one error type with its codes.
//
// It must not import any implementation package: gvisor, sqlite, blobdir,
// httpapi and the rest depend on it, never the other way round.
package airlock
