package leftovers

import (
	"errors"
	"os"
	"path/filepath"

	"github.com/airlockhq/airlock/internal/cgroups"
	"github.com/airlockhq/airlock/internal/loopdisk"
)

// Sweep is one backend's sandboxes on the host, each named by its ID: a
// cgroup CgroupParent/<id> and a directory Dir/<id>.
type Sweep struct {
	Cgroups      cgroups.Manager
	CgroupParent string
	Dir          string
	// Live reports whether the sandbox of this ID is still in use (never
	// swept).
	Live func(id string) bool
}

// Run removes the cgroup (killing what runs in it) and the directory
// (unmounting everything below it first; a directory with a mount that
// stays is kept) of every sandbox that is not live, and adds their IDs
// to ended. Errors are joined; Run goes on past each.
func (s Sweep) Run(ended map[string]bool) error {
	var errs []error
	cgs, err := s.Cgroups.List(s.CgroupParent)
	if err != nil {
		errs = append(errs, err)
	}
	for _, id := range cgs {
		if s.Live(id) {
			continue
		}
		if err := s.Cgroups.Remove(filepath.Join(s.CgroupParent, id)); err != nil {
			errs = append(errs, err)
		}
		ended[id] = true
	}
	entries, err := os.ReadDir(s.Dir)
	if err != nil {
		errs = append(errs, err)
	}
	for _, e := range entries {
		id := e.Name()
		if s.Live(id) {
			continue
		}
		dir := filepath.Join(s.Dir, id)
		if err := loopdisk.UnmountAll(dir); err != nil {
			errs = append(errs, err)
			continue // never remove a directory with a mount still in it
		}
		if err := os.RemoveAll(dir); err != nil {
			errs = append(errs, err)
		}
		ended[id] = true
	}
	return errors.Join(errs...)
}

// IDs returns the keys of ended.
func IDs(ended map[string]bool) []string {
	out := make([]string, 0, len(ended))
	for id := range ended {
		out = append(out, id)
	}
	return out
}
