// Package wsarchive turns a sandbox's workspace into a tar stream and back,
// from the host side of the workspace's disk.
//
// Both directions treat the workspace as hostile: it is read and written
// only through an os.Root (no path resolves outside it and no symlink is
// followed out of it), directories are walked through their own
// descriptors, and what is kept is regular files with their bytes and
// permission bits, directories (empty ones too) and symlinks as links
// whose targets stay inside the workspace. Owners are not kept: a
// restored tree belongs to the sandbox's user. Extract is strict: an
// absolute or escaping path, a link pointing outside, a hard link, a
// device or any other type, a duplicate or an oversized stream is an
// error, never a partial guess.
//
// The package owns the archive format and its checks; it must not know
// about sessions, encryption or blobs.
package wsarchive
