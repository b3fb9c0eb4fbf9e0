// Package sandboxio is the host-side glue every backend needs around a
// sandbox's first process: its stdio pipes joined into one protocol
// stream, its stderr log capped, the end of that log for error messages,
// and its cgroup's figures as domain stats. It knows no backend.
package sandboxio
