package gvisor

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"
)

// directRemovals counts records removed without `runsc delete` (tests).
var directRemovals atomic.Int64

// recordFiles are the files runsc keeps in its root for container id: its
// state, the lock on it and the sandbox's control socket.
func (b *Backend) recordFiles(id string) []string {
	root := b.cfg.runscRoot()
	return []string{
		b.stateFile(id),
		filepath.Join(root, id+"_sandbox:"+id+".lock"),
		filepath.Join(root, "runsc-"+id+".sock"),
	}
}

// removeRecordIfGone removes runsc's record of the sandbox itself, without
// a `runsc delete`, when its processes are shown to be gone: neither the
// sandbox process nor its gofer runs (a PID reused since would count as
// running, and runsc is asked) and its cgroup holds no process. For such a container that is all `runsc delete` does (its
// cgroup and run directory are the destroy's own work), and it saves a
// start of the runsc binary per destroy (about 70 ms of CPU on the 2-core
// development VM, the largest part of a run's cost that Airlock adds on
// top of gVisor: BENCHMARKS.md, "Host CPU per run"). It reports false,
// having removed nothing, when it cannot tell (a sandbox reattached after
// a restart, whose gofer is not known); the caller then asks runsc.
func (s *Sandbox) removeRecordIfGone() (bool, error) {
	if len(s.pids) == 0 {
		s.b.cfg.Logger.Debug("destroy: processes not known; runsc deletes", "sandbox", s.id)
		return false, nil
	}
	// The gofer may end a moment after the sandbox process that the kill
	// waited for: give it a little while, still far less than a runsc
	// start.
	gone := func() bool {
		for _, pid := range s.pids {
			if running(pid) {
				return false
			}
		}
		return s.b.cgroups.Empty(s.cgroup)
	}
	for wait := 100 * time.Microsecond; !gone(); wait *= 2 {
		if wait > 50*time.Millisecond {
			return false, nil
		}
		time.Sleep(wait)
	}
	var errs []error
	for _, f := range s.b.recordFiles(s.id) {
		if err := os.Remove(f); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	directRemovals.Add(1)
	return true, errors.Join(errs...)
}
