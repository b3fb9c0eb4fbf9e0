package node

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// stateLockName is the lock file in the state directory.
const stateLockName = "airlockd.lock"

// lockStateDir makes sure one airlockd at a time uses the state directory:
// it takes an exclusive flock(2) on <dir>/airlockd.lock, held until the
// returned file is closed or the process ends (a crash releases it too),
// and writes the process's PID into the file. If another process holds
// the lock it returns an error naming the directory and, when it can tell,
// the holder's PID. Call it before anything touches the directory's
// contents: a second airlockd must not reconcile (end the first one's
// sandboxes as leftovers) or replace the first one's network rules.
//
// The file is opened close-on-exec, so the sandbox processes airlockd
// starts never hold the lock after airlockd is gone.
func lockStateDir(dir string) (*os.File, error) {
	path := filepath.Join(dir, stateLockName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|syscall.O_CLOEXEC|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock state directory %s: %w", dir, err)
	}
	for {
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	if errors.Is(err, unix.EWOULDBLOCK) {
		holder := "another process"
		if pid := lockHolder(f); pid > 0 {
			holder = fmt.Sprintf("another process (pid %d)", pid)
		}
		f.Close()
		return nil, fmt.Errorf("state directory %s is in use by %s: one state directory serves one airlockd (lock %s); stop it or use another --state-dir", dir, holder, path)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("lock state directory %s: %w", dir, err)
	}
	if err := f.Truncate(0); err == nil {
		f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return f, nil
}

// lockHolder returns the PID of the process that holds the lock on f: the
// PID the holder wrote into it if that process is alive, else the one
// /proc/locks names for the file; 0 if neither tells.
func lockHolder(f *os.File) int {
	b, _ := io.ReadAll(io.NewSectionReader(f, 0, 32))
	if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 0 && unix.Kill(pid, 0) != unix.ESRCH {
		return pid
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return 0
	}
	locks, err := os.Open("/proc/locks")
	if err != nil {
		return 0
	}
	defer locks.Close()
	// "1: FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF"; a blocked waiter
	// has "->" after the number.
	want := fmt.Sprintf("%02x:%02x:%d", unix.Major(st.Dev), unix.Minor(st.Dev), st.Ino)
	sc := bufio.NewScanner(locks)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 6 || fields[1] != "FLOCK" || fields[3] != "WRITE" || fields[5] != want {
			continue
		}
		if pid, err := strconv.Atoi(fields[4]); err == nil {
			return pid
		}
	}
	return 0
}
