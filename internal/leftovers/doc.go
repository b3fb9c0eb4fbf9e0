// Package leftovers finds and removes what a backend's sandboxes leave on
// the host when their process is gone: a cgroup per sandbox under the
// backend's parent, a directory per sandbox (its mounts included), and
// processes in those cgroups or running as a host uid the backend handed
// out. Sweep removes them (the reconcilers at start), Check reports them
// (tests after every case).
//
// It knows no backend: each says where its cgroups and directories are
// and which sandboxes are still live. It must not touch anything outside
// the cgroup parent and the directory it is given.
package leftovers
