package gvisor

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// The processes of a sandbox. `runsc run --detach` (and `restore
// --detach`) returns once the sandbox runs, leaving two processes that
// belong to no runsc command: the sandbox (the gVisor kernel) and its
// gofer. Neither depends on airlockd: that is what lets a sandbox outlive
// it. While airlockd lives it is their parent (a child subreaper, see
// becomeSubreaper) and reaps them; a sandbox reattached after a restart
// has init as their parent, and airlockd only watches them end.

var subreaperOnce sync.Once

// becomeSubreaper makes orphaned descendants (the sandboxes and gofers
// that `runsc run --detach` leaves behind) this process's children, so
// that watch can reap them instead of leaving zombies to an init that may
// not reap (a container's, say).
func becomeSubreaper() {
	subreaperOnce.Do(func() { unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) })
}

// watch calls done once process pid has exited, and reaps it if it is
// this process's child. It returns an error if pid is not running.
func watch(pid int, done func()) error {
	fd, err := unix.PidfdOpen(pid, unix.PIDFD_NONBLOCK)
	if err != nil {
		return fmt.Errorf("gvisor: process %d: %w", pid, err)
	}
	f := os.NewFile(uintptr(fd), fmt.Sprintf("pidfd:%d", pid))
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return err
	}
	go func() {
		defer f.Close()
		// A pidfd becomes readable when its process exits; the runtime's
		// poller waits for that without holding a thread.
		rc.Read(func(fd uintptr) bool {
			n, _ := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, 0)
			return n > 0
		})
		rc.Control(func(fd uintptr) {
			var info unix.Siginfo
			unix.Waitid(unix.P_PIDFD, int(fd), &info, unix.WEXITED|unix.WNOHANG, nil) // ECHILD when not ours
		})
		done()
	}()
	return nil
}

// runscState is the part of runsc's record of a container that names
// its processes (<root>/<id>_sandbox:<id>.state).
type runscState struct {
	GoferPid int `json:"goferPid"`
	Sandbox  struct {
		Pid int `json:"pid"`
	} `json:"sandbox"`
}

// stateFile is runsc's record of container id.
func (b *Backend) stateFile(id string) string {
	return filepath.Join(b.cfg.runscRoot(), id+"_sandbox:"+id+".state")
}

// hasRecord reports whether runsc has a record of container id.
func (b *Backend) hasRecord(id string) bool {
	_, err := os.Stat(b.stateFile(id))
	return err == nil
}

// processes returns the sandbox and gofer PIDs runsc recorded for
// container id.
func (b *Backend) processes(id string) (sandbox, gofer int, err error) {
	data, err := os.ReadFile(b.stateFile(id))
	if err != nil {
		return 0, 0, fmt.Errorf("gvisor: runsc's record of %s: %w", id, err)
	}
	var st runscState
	if err := json.Unmarshal(data, &st); err != nil {
		return 0, 0, fmt.Errorf("gvisor: runsc's record of %s: %w", id, err)
	}
	if st.Sandbox.Pid <= 0 {
		return 0, 0, fmt.Errorf("gvisor: runsc's record of %s names no sandbox process", id)
	}
	return st.Sandbox.Pid, st.GoferPid, nil
}

// isSandboxProcess reports whether pid runs runsc's sandbox of
// container id (a PID may have been reused since runsc recorded it).
func isSandboxProcess(pid int, id string) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return false
	}
	args := strings.Split(string(b), "\x00")
	return len(args) > 0 && args[len(args)-1] == id || strings.Contains(string(b), "\x00"+id+"\x00")
}

// killStrayCommands kills runsc commands on this backend's state (a
// `runsc run --detach` half way, say) that this process did not start: a
// crashed airlockd's commands run on without it and could finish making
// a sandbox after the reconciler looked. It waits until they are gone.
func (b *Backend) killStrayCommands() {
	root := "--root\x00" + b.cfg.runscRoot() + "\x00"
	me := os.Getpid()
	for attempt := 0; attempt < 50; attempt++ {
		var stray []int
		entries, _ := os.ReadDir("/proc")
		for _, e := range entries {
			pid, err := strconv.Atoi(e.Name())
			if err != nil || pid == me {
				continue
			}
			cmd, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
			if err != nil || !strings.Contains(string(cmd), root) {
				continue
			}
			if strings.HasPrefix(string(cmd), "runsc-") {
				continue // a sandbox or a gofer: ended with its container
			}
			if parentOf(pid) == me {
				continue // a command of this process
			}
			stray = append(stray, pid)
		}
		if len(stray) == 0 {
			return
		}
		for _, pid := range stray {
			unix.Kill(pid, unix.SIGKILL)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// parentOf returns the parent PID of pid, or 0.
func parentOf(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// pid (comm) state ppid ...; comm may hold spaces and parentheses.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 2 {
		return 0
	}
	ppid, _ := strconv.Atoi(f[1])
	return ppid
}
