// Package loopdisk gives a sandbox its size-capped scratch storage: a
// sparse file on the host, formatted as ext4 and mounted through a loop
// device, so the host kernel enforces its size and inode count and its
// pages are ordinary page cache (a full disk does not eat the sandbox's
// memory limit, as a tmpfs would). It also finds and removes the mounts a
// sandbox's run directory holds.
//
// It owns only the files and mount points its callers name; the gvisor and
// namespaces backends share it.
package loopdisk
