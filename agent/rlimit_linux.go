package agent

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"unsafe"
)

// A program started with a memory limit runs through the agent binary
// itself: `airlock-agent __airlock_exec LIMIT -- PATH ARGV...` sets
// RLIMIT_AS and execs PATH, so the limit is in place before the program's
// first instruction (setting it with prlimit after the start would race
// the program's first allocations). The host cgroup stays the hard
// boundary of the sandbox as a whole; this limit only makes one greedy
// process fail (MemoryError, ENOMEM) instead of the whole sandbox being
// killed.

// helperArg is os.Args[1] of the exec helper.
const helperArg = "__airlock_exec"

// RunHelperIfAsked turns this process into the exec helper when it was
// started as one, and never returns then. Call it first thing in main
// (and in TestMain of tests that run the agent in-process).
func RunHelperIfAsked() {
	if len(os.Args) < 6 || os.Args[1] != helperArg || os.Args[3] != "--" {
		return
	}
	limit, err := strconv.ParseUint(os.Args[2], 10, 64)
	if err != nil {
		fmt.Fprintf(os.Stderr, "airlock: bad memory limit %q\n", os.Args[2])
		os.Exit(126)
	}
	path, argv := os.Args[4], os.Args[5:]
	// Everything execve needs is allocated before the limit: the Go
	// runtime may hold more address space than the limit allows, and must
	// not need a new mapping afterwards.
	pathp, err := syscall.BytePtrFromString(path)
	if err != nil {
		os.Exit(126)
	}
	argvp, err := syscall.SlicePtrFromStrings(argv)
	if err != nil {
		os.Exit(126)
	}
	envp, err := syscall.SlicePtrFromStrings(os.Environ())
	if err != nil {
		os.Exit(126)
	}
	lim := syscall.Rlimit{Cur: limit, Max: limit}
	if err := syscall.Setrlimit(syscall.RLIMIT_AS, &lim); err != nil {
		fmt.Fprintf(os.Stderr, "airlock: set memory limit: %v\n", err)
		os.Exit(126)
	}
	_, _, errno := syscall.RawSyscall(syscall.SYS_EXECVE,
		uintptr(unsafe.Pointer(pathp)), uintptr(unsafe.Pointer(&argvp[0])), uintptr(unsafe.Pointer(&envp[0])))
	code := 126
	if errno == syscall.ENOENT {
		code = 127
	}
	fmt.Fprintf(os.Stderr, "airlock: exec %s: %v\n", argv[0], errno)
	os.Exit(code)
}

// command returns the command that runs argv, under an address-space
// limit when memLimit > 0. Like exec.Command, it looks argv[0] up in the
// agent's PATH; a failed lookup is in cmd.Err and fails cmd.Start.
func (s *core) command(argv []string, memLimit int64) *exec.Cmd {
	if memLimit <= 0 {
		return exec.Command(argv[0], argv[1:]...)
	}
	path, err := exec.LookPath(argv[0])
	if err != nil {
		cmd := exec.Command(argv[0], argv[1:]...)
		if cmd.Err == nil {
			cmd.Err = err
		}
		return cmd
	}
	self := s.cfg.SelfExe
	if self == "" {
		if self, err = os.Executable(); err != nil {
			cmd := exec.Command(argv[0])
			cmd.Err = errors.New("memory limit: cannot find the agent binary: " + err.Error())
			return cmd
		}
	}
	args := append([]string{helperArg, strconv.FormatInt(memLimit, 10), "--", path}, argv...)
	return exec.Command(self, args...)
}
