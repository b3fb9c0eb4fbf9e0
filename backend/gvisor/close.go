package gvisor

import (
	"path/filepath"

	"golang.org/x/sys/unix"
)

// nullNetNS is the file in runsc's root directory that runsc bind-mounts
// its shared empty network namespace (the one its gofers join) onto.
const nullNetNS = "null-netns"

// Close releases what the backend holds on the host beyond its sandboxes:
// runsc's pin of the empty network namespace in the backend's runsc root.
// Sandboxes that outlive the daemon keep working, since their gofers are
// already in that namespace; the next runsc that needs it pins it again.
func (b *Backend) Close() error {
	UnpinNullNetNS(b.cfg.runscRoot())
	return nil
}

// UnpinNullNetNS removes runsc's pin of its empty network namespace from
// the runsc root directory root (--root), for anyone done with running
// runsc there. runsc may have stacked several mounts there (its creations
// are not serialised), so it unmounts until none is left.
func UnpinNullNetNS(root string) {
	p := filepath.Join(root, nullNetNS)
	for unix.Unmount(p, unix.MNT_DETACH) == nil {
	}
}
