// Package disk implements airlock.Blobs on a local directory: the default
// artifact store of a single-node Airlock.
//
// It owns everything under its directory: blobs live at blobs/<key> and
// uploads in progress at tmp/. A Put writes a temporary file, fsyncs it and
// renames it into place, so a reader sees a whole blob or none. Files are
// created 0600 and directories 0700; all access goes through an os.Root, so
// no key or planted symlink reaches outside the directory.
//
// It stores bytes by key and knows nothing of tenants or executions: callers
// (the manager, the HTTP layer) choose keys and check who may read them, and
// the metadata lives in the Store. It must not import any other
// implementation package.
package disk
