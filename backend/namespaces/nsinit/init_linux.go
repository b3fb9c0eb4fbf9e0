package nsinit

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/airlockhq/airlock/internal/harden"
)

// RunIfAsked runs the init stage when the process was started with
// InitArg as its first argument, and never returns then: it execs the
// agent or exits with status 1. Call it first thing in main.
func RunIfAsked() {
	if len(os.Args) < 2 || os.Args[1] != InitArg {
		return
	}
	// Capabilities, no_new_privs, Landlock and the exec are per thread:
	// all of it happens on this one.
	runtime.LockOSThread()
	report := os.NewFile(ReportFD, "report")
	unix.CloseOnExec(ReportFD)
	stage, err := run(report)
	if err != nil {
		json.NewEncoder(report).Encode(Report{Stage: stage, Error: err.Error()})
		os.Exit(1)
	}
	os.Exit(0) // not reached: run execs
}

// run does the init stage; it returns only on failure, naming the stage.
func run(report *os.File) (string, error) {
	config := os.NewFile(ConfigFD, "config")
	var cfg Config
	if err := json.NewDecoder(io.LimitReader(config, 1<<20)).Decode(&cfg); err != nil {
		return "config", err
	}
	if err := cfg.Validate(); err != nil {
		return "config", err
	}
	// The mounts are made while the host makes the sandbox's cgroup.
	if err := setupRoot(&cfg); err != nil {
		return "mounts", err
	}
	// The host closes the config pipe once the cgroup is ready (and, on
	// cgroup v2, this process is in it). On v1 this thread moves itself
	// in: only this thread (the others end at exec), which spares the
	// host the global lock of moving a whole process. The cgroup then
	// becomes the root of the sandbox's cgroup namespace. Nothing has run
	// in the sandbox before this point.
	if _, err := io.Copy(io.Discard, io.LimitReader(config, 1<<20)); err != nil {
		return "cgroup", err
	}
	config.Close()
	for _, f := range cfg.CgroupTasks {
		if err := os.WriteFile(f, []byte("0"), 0); err != nil {
			return "cgroup", err
		}
	}
	if err := unix.Unshare(unix.CLONE_NEWCGROUP); err != nil {
		return "cgroup namespace", err
	}
	if err := unix.Sethostname([]byte(cfg.Hostname)); err != nil {
		return "hostname", err
	}
	if err := loopbackUp(); err != nil {
		return "loopback", err
	}
	if err := pivot(cfg.Rootfs); err != nil {
		return "pivot_root", err
	}
	for _, r := range cfg.Rlimits {
		if err := unix.Setrlimit(r.Resource, &unix.Rlimit{Cur: r.Cur, Max: r.Max}); err != nil {
			return "rlimits", fmt.Errorf("resource %d: %w", r.Resource, err)
		}
	}
	// The credentials change on this thread only: it is the one that
	// execs, and exec ends every other (which run only the Go runtime
	// until then). Changing every thread would stop them all three times.
	if _, _, errno := unix.RawSyscall(unix.SYS_SETGROUPS, 0, 0, 0); errno != 0 {
		return "credentials", fmt.Errorf("setgroups: %w", errno)
	}
	if _, _, errno := unix.RawSyscall(unix.SYS_SETRESGID, uintptr(cfg.GID), uintptr(cfg.GID), uintptr(cfg.GID)); errno != 0 {
		return "credentials", fmt.Errorf("setresgid: %w", errno)
	}
	if _, _, errno := unix.RawSyscall(unix.SYS_SETRESUID, uintptr(cfg.UID), uintptr(cfg.UID), uintptr(cfg.UID)); errno != 0 {
		return "credentials", fmt.Errorf("setresuid: %w", errno)
	}
	if err := harden.DropCapabilities(); err != nil {
		return "capabilities", err
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return "no_new_privs", err
	}
	abi, err := applyLandlock(append(landlockRules, volumeRules(cfg.Volumes)...))
	if err != nil {
		return "landlock", err
	}
	// Nothing but the three stdio descriptors reaches the agent.
	if err := unix.CloseRange(3, math.MaxUint32, unix.CLOSE_RANGE_CLOEXEC); err != nil {
		for fd := 3; fd < 1024; fd++ {
			unix.CloseOnExec(fd)
		}
	}
	if err := harden.InstallSeccomp(); err != nil {
		return "seccomp", err
	}
	if err := unix.Chdir(cfg.Cwd); err != nil {
		return "cwd", err
	}
	json.NewEncoder(report).Encode(Report{LandlockABI: abi, Seccomp: true})
	argv := append([]string{cfg.Agent}, cfg.Args...)
	err = syscall.Exec(cfg.Agent, argv, cfg.Env)
	return "exec agent", err
}
