package node

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock/internal/testenv/testreq"
)

// The state directory's lock: a second holder is refused with an error
// naming the directory and the holder's PID; closing releases it; a PID
// left in the file by a process that is gone does not matter.
func TestLockStateDir(t *testing.T) {
	dir := t.TempDir()
	first, err := lockStateDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, stateLockName))
	if err != nil || strings.TrimSpace(string(b)) != strconv.Itoa(os.Getpid()) {
		t.Fatalf("lock file holds %q (%v), want this PID", b, err)
	}
	// flock(2) locks belong to the open file: a second open in this
	// process conflicts as another process's would.
	second, err := lockStateDir(dir)
	if err == nil {
		second.Close()
		t.Fatal("a second lock of the same state directory succeeded")
	}
	for _, want := range []string{dir, fmt.Sprintf("pid %d", os.Getpid()), "in use"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	// Without the PID in the file (a holder that has just taken the lock),
	// the holder is found in /proc/locks.
	if err := first.Truncate(0); err != nil {
		t.Fatal(err)
	}
	if _, err := lockStateDir(dir); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("pid %d", os.Getpid())) {
		t.Errorf("with an empty lock file: %v, want the holder's pid from /proc/locks", err)
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	again, err := lockStateDir(dir)
	if err != nil {
		t.Fatalf("lock after release: %v", err)
	}
	again.Close()

	// A stale PID (of a process that has exited) is simply overwritten.
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		testreq.Skipf(t, "skipped: cannot run true: %v", err)
	}
	os.WriteFile(filepath.Join(dir, stateLockName), []byte(strconv.Itoa(cmd.Process.Pid)+"\n"), 0o600)
	l, err := lockStateDir(dir)
	if err != nil {
		t.Fatalf("lock with a stale PID in the file: %v", err)
	}
	l.Close()
}

// The lock is released when its holder dies, however it dies, and is not
// inherited by the processes airlockd starts.
func TestLockStateDirReleasedWithTheProcess(t *testing.T) {
	if os.Getenv("AIRLOCK_STATELOCK_CHILD") != "" {
		dir := os.Getenv("AIRLOCK_STATELOCK_CHILD")
		if _, err := lockStateDir(dir); err != nil {
			fmt.Println("lock:", err)
			os.Exit(1)
		}
		// A child of the holder: it must not keep the lock after the
		// holder is killed.
		sleeper := exec.Command("sleep", "60")
		if err := sleeper.Start(); err != nil {
			fmt.Println("start sleeper:", err)
			os.Exit(1)
		}
		fmt.Printf("locked %d\n", sleeper.Process.Pid)
		os.Stdout.Sync()
		select {}
	}
	dir := t.TempDir()
	child := exec.Command(os.Args[0], "-test.run=^TestLockStateDirReleasedWithTheProcess$")
	child.Env = append(os.Environ(), "AIRLOCK_STATELOCK_CHILD="+dir)
	out, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	defer child.Process.Kill()
	var line string
	buf := make([]byte, 256)
	for !strings.Contains(line, "\n") {
		n, err := out.Read(buf)
		line += string(buf[:n])
		if err != nil {
			t.Fatalf("child: %q, %v", line, err)
		}
	}
	var sleeper int
	if _, err := fmt.Sscanf(line, "locked %d", &sleeper); err != nil {
		t.Fatalf("child said %q", line)
	}
	defer func() {
		if p, err := os.FindProcess(sleeper); err == nil {
			p.Kill()
		}
	}()
	if _, err := lockStateDir(dir); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("pid %d", child.Process.Pid)) {
		t.Fatalf("while the child holds the lock: %v, want refused naming pid %d", err, child.Process.Pid)
	}
	child.Process.Kill()
	child.Wait()
	// The sleeper (the holder's child) still runs; the lock is free.
	deadline := time.Now().Add(10 * time.Second)
	for {
		l, err := lockStateDir(dir)
		if err == nil {
			l.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("lock still held after its holder was killed: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
