package leftovers_test

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/airlockhq/airlock/internal/cgroups"
	"github.com/airlockhq/airlock/internal/leftovers"
)

// fakeCgroups is a parent with these children; Remove forgets one.
type fakeCgroups struct {
	cgroups.Manager
	children []string
	removed  []string
}

func (f *fakeCgroups) List(string) ([]string, error) { return slices.Clone(f.children), nil }
func (f *fakeCgroups) Remove(path string) error {
	f.removed = append(f.removed, path)
	f.children = slices.DeleteFunc(f.children, func(c string) bool { return "parent/"+c == path })
	return nil
}

// Sweep removes the cgroups and directories of every sandbox that is
// not live, reports their IDs once each, and leaves the live ones; a
// clean host then passes Check, and one with leftovers does not.
func TestSweepAndCheck(t *testing.T) {
	dir := t.TempDir()
	for _, id := range []string{"live", "dead-dir", "dead-both"} {
		if err := os.MkdirAll(filepath.Join(dir, id, "jail"), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	cg := &fakeCgroups{children: []string{"live", "dead-cg", "dead-both"}}
	check := leftovers.Check{Cgroups: cg, CgroupParent: "parent", Dir: dir, DirWhat: "run directories", Live: []string{"live"}}
	if err := check.Err(); err == nil || !strings.Contains(err.Error(), "sandbox live not destroyed") ||
		!strings.Contains(err.Error(), "cgroups left") || !strings.Contains(err.Error(), "run directories left") {
		t.Errorf("Check with leftovers: %v", err)
	}
	ended := map[string]bool{}
	live := func(id string) bool { return id == "live" }
	if err := (leftovers.Sweep{Cgroups: cg, CgroupParent: "parent", Dir: dir, Live: live}).Run(ended); err != nil {
		t.Fatal(err)
	}
	ids := leftovers.IDs(ended)
	slices.Sort(ids)
	if !slices.Equal(ids, []string{"dead-both", "dead-cg", "dead-dir"}) {
		t.Errorf("ended %v", ids)
	}
	if !slices.Equal(cg.children, []string{"live"}) || slices.Contains(cg.removed, "parent/live") {
		t.Errorf("cgroups left %v, removed %v", cg.children, cg.removed)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 || ents[0].Name() != "live" {
		t.Errorf("directories left: %v", ents)
	}
	if err := os.RemoveAll(filepath.Join(dir, "live")); err != nil {
		t.Fatal(err)
	}
	cg.children = nil
	check.Live = nil
	if err := check.Err(); err != nil {
		t.Errorf("Check on a clean host: %v", err)
	}
	// A missing directory is no leftover for Check, an error for Sweep.
	check.Dir = filepath.Join(dir, "none")
	if err := check.Err(); err != nil {
		t.Errorf("Check without the directory: %v", err)
	}
}

// Processes finds a process running as a listed uid (this test's own).
func TestProcesses(t *testing.T) {
	pids := leftovers.Processes("no-such-parent-"+t.Name(), map[int]bool{os.Getuid(): true})
	if !slices.Contains(pids, strconv.Itoa(os.Getpid())) {
		t.Errorf("this process (uid %d) not among %v", os.Getuid(), pids)
	}
	if pids := leftovers.Processes("no-such-parent-"+t.Name(), nil); len(pids) != 0 {
		t.Errorf("processes in no cgroup and of no uid: %v", pids)
	}
}
