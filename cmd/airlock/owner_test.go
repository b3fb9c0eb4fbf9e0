package main

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// Under sudo, what --out writes belongs to the user who ran sudo: the
// directories airlock made and every artifact, not a directory that was
// there before.
func TestOutBelongsToTheSudoUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: files are given to SUDO_UID only by a root process")
	}
	cliEnv(t)
	t.Setenv("SUDO_UID", "4242")
	t.Setenv("SUDO_GID", "4343")
	f := newFakeServer(t)
	work := t.TempDir()
	outDir := filepath.Join(work, "out", "nested")
	prog := filepath.Join(work, "a.py")
	os.WriteFile(prog, []byte("artifacts"), 0o644)
	runCLI(t, runRun, "", "--url", f.URL, "--key", fakeKey, "--out", outDir, prog)
	owner := func(p string) (uint32, uint32) {
		fi, err := os.Lstat(p)
		if err != nil {
			t.Fatal(err)
		}
		st := fi.Sys().(*syscall.Stat_t)
		return st.Uid, st.Gid
	}
	for _, p := range []string{filepath.Join(work, "out"), outDir, filepath.Join(outDir, "data.csv"), filepath.Join(outDir, "up.txt")} {
		if u, g := owner(p); u != 4242 || g != 4343 {
			t.Errorf("%s belongs to %d:%d, want 4242:4343", p, u, g)
		}
	}
	if u, _ := owner(work); u != 0 {
		t.Errorf("the directory that was there, %s, was given away: uid %d", work, u)
	}

	// Not under sudo (or not root): nothing changes hands.
	t.Setenv("SUDO_UID", "")
	if _, _, ok := invoker(); ok {
		t.Error("an invoker without SUDO_UID")
	}
}
