// Package cgroups creates, limits, measures and removes the host cgroups
// that hold sandboxes, on cgroup v1 (one hierarchy per controller) and v2
// (the unified hierarchy). It knows nothing of sandboxes: callers give it
// a relative path such as "airlock/<id>".
package cgroups
