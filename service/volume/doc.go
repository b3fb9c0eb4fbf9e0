// Package volume keeps the tenants' volumes on a node: named disks of a
// fixed size (a sparse ext4 image each, formatted and mounted through a
// loop device by package loopdisk, so the host kernel enforces the size)
// that outlive sessions and are mounted into them.
//
// It owns the images under Config.Dir/disks and their host mounts under
// Config.Dir/mnt, and the volumes' records and claims in the store
// (airlock.VolumeStore). A session's sandbox binds a volume's host mount
// at the path the session asked for; the backend does the binding.
//
// One writer at a time: a claim is a row in the store, and at most one
// claim of a volume may be read-write (a unique index), so two sessions,
// two processes or two nodes racing for it cannot both win. Readers
// (read_only) may sit beside the writer; they bind the same host mount
// read-only and see its changes.
//
// Claims outlive a crash of the server: the sandboxes do (they are
// reattached at start), and so do the host mounts. Recover, called once
// at start after the sessions were taken back, releases the claims of
// sessions that are gone and unmounts what no claim holds.
//
// Snapshots (snapshot.go): a volume's files, read from its host mount
// while no session writes it and sealed with the tenant's data key (the
// format of workspace snapshots) into the blob store; a new volume can
// be made from one. While a snapshot is taken no writer may claim the
// volume, and while a volume is filled from a snapshot nobody may mount
// it: the service keeps both marks in memory (busy), which is enough
// since a volume's mounts all happen on the node that holds it.
//
// It must not touch sandboxes (the backends bind the mounts) nor the
// sessions' lifecycle (package session calls Attach and Detach).
package volume
