package main

import (
	"os"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/airlockhq/airlock/internal/testenv"
)

// A bare runsc baseline leaves nothing on the host: not its working
// directory, and not the mount runsc makes in the root directory it is
// given (it pins the empty network namespace its gofers share by
// bind-mounting it onto null-netns there).
func TestBaselineRunscLeavesNothing(t *testing.T) {
	testenv.RequireRoot(t)
	testenv.RequireRunsc(t)
	testenv.Images(t)
	state := testenv.StateDir() // before isolate, which clears AIRLOCK_*
	isolate(t)
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	t.Cleanup(func() { // also when the test fails: no mount outlives it
		mi, _ := os.ReadFile("/proc/self/mountinfo")
		for _, line := range strings.Split(string(mi), "\n") {
			if f := strings.Fields(line); len(f) > 4 && strings.HasPrefix(f[4], tmp) {
				for unix.Unmount(f[4], unix.MNT_DETACH) == nil {
				}
			}
		}
	})
	out, errOut, code := airlockCLI(t, "", "node", "baseline", "--kind", "runsc", "--state-dir", state,
		"--requests", "2", "--concurrency", "2")
	if code != 0 {
		t.Fatalf("baseline exited %d: %s%s", code, out, errOut)
	}
	if !strings.Contains(out, "runsc baseline") || !strings.Contains(out, "2 runs (0 errors)") {
		t.Errorf("baseline printed %q", out)
	}
	mountinfo, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(mountinfo), "\n") {
		if strings.Contains(line, tmp) {
			t.Errorf("a mount is left under the baseline's TMPDIR: %s", line)
		}
	}
	ents, err := os.ReadDir(tmp)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		t.Errorf("left in the baseline's TMPDIR: %s", e.Name())
	}
}
