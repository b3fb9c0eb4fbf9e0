package nsinit

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/airlockhq/airlock/internal/testenv/testreq"
)

// TestMain runs the Landlock child when TestLandlock starts this binary
// as one.
func TestMain(m *testing.M) {
	if dirs := os.Getenv("NSINIT_LANDLOCK_CHILD"); dirs != "" {
		landlockChild(strings.Split(dirs, ":"))
		return
	}
	os.Exit(m.Run())
}

// landlockChild restricts itself to writing beneath allowed and reading
// everywhere, then tries a write in each place and prints the results.
func landlockChild(dirs []string) {
	allowed, other := dirs[0], dirs[1]
	runtime.LockOSThread()
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		fmt.Println("nnp", err)
		os.Exit(1)
	}
	abi, err := applyLandlock([]landlockRule{
		{"/", fsRead | unix.LANDLOCK_ACCESS_FS_EXECUTE},
		{allowed, fsRightsV1 | fsRefer | fsTruncate},
	})
	if err != nil {
		fmt.Println("landlock", err)
		os.Exit(1)
	}
	fmt.Printf("abi=%d\n", abi)
	for _, d := range []string{allowed, other} {
		err := os.WriteFile(filepath.Join(d, "f"), []byte("x"), 0o644)
		fmt.Printf("write %s=%v\n", filepath.Base(d), errors.Is(err, unix.EACCES))
	}
	_, err = os.ReadFile("/proc/self/status")
	fmt.Printf("read=%v\n", err == nil)
	os.Exit(0)
}

func TestLandlock(t *testing.T) {
	if LandlockABI() == 0 {
		testreq.Skip(t, "skipped: the kernel offers no Landlock (CONFIG_SECURITY_LANDLOCK, and landlock in the lsm= list)")
	}
	allowed, other := t.TempDir(), t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "NSINIT_LANDLOCK_CHILD="+allowed+":"+other)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v: %s", err, out)
	}
	got := string(out)
	for _, want := range []string{"write " + filepath.Base(allowed) + "=false", "write " + filepath.Base(other) + "=true", "read=true"} {
		if !strings.Contains(got, want) {
			t.Errorf("want %q in the child's report:\n%s", want, got)
		}
	}
	if !strings.Contains(got, fmt.Sprintf("abi=%d", LandlockABI())) {
		t.Errorf("the child did not apply the kernel's ABI %d:\n%s", LandlockABI(), got)
	}
}
