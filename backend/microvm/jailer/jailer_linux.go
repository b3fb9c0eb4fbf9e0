package jailer

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"syscall"

	"golang.org/x/sys/unix"
)

// Command returns the jailer process for cfg, not started: self is the
// binary to run again (os.Executable()). Start it, put it into its
// cgroup, then call Send: the jailer waits for its config before it does
// anything.
func Command(self string) (*exec.Cmd, *os.File, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, nil, err
	}
	cmd := exec.Command(self, Arg)
	cmd.Dir = "/"
	cmd.Env = []string{}
	cmd.ExtraFiles = []*os.File{r} // fd 3
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags: syscall.CLONE_NEWNS | syscall.CLONE_NEWPID | syscall.CLONE_NEWIPC |
			syscall.CLONE_NEWUTS | syscall.CLONE_NEWNET,
		Setsid: true,
	}
	return cmd, w, nil
}

// Send writes cfg to the jailer's config pipe and closes it.
func Send(w *os.File, cfg Config) error {
	defer w.Close()
	if err := cfg.Validate(); err != nil {
		return err
	}
	return json.NewEncoder(w).Encode(cfg)
}

// RunIfAsked runs the jailer when the process was started with Arg as
// its first argument, and never returns then: it execs the program or
// exits with status 1 after printing why to stderr. Call it first thing
// in main.
func RunIfAsked() {
	if len(os.Args) < 2 || os.Args[1] != Arg {
		return
	}
	runtime.LockOSThread()
	stage, err := run()
	fmt.Fprintf(os.Stderr, "jailer: %s: %v\n", stage, err)
	os.Exit(1)
}

func run() (string, error) {
	f := os.NewFile(ConfigFD, "config")
	data, err := io.ReadAll(io.LimitReader(f, 1<<20))
	if err != nil {
		return "config", err
	}
	f.Close()
	var cfg Config
	if err := json.Unmarshal(data, &cfg); err != nil {
		return "config", err
	}
	if err := cfg.Validate(); err != nil {
		return "config", err
	}
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return "private mounts", err
	}
	for _, b := range cfg.Binds {
		if err := bind(cfg.Root, b); err != nil {
			return "bind " + b.Target, err
		}
	}
	for _, l := range cfg.Symlinks {
		if err := os.Symlink(l[0], filepath.Join(cfg.Root, l[1])); err != nil && !errors.Is(err, os.ErrExist) {
			return "symlink", err
		}
	}
	proc := filepath.Join(cfg.Root, "proc")
	if err := os.MkdirAll(proc, 0o555); err != nil {
		return "proc", err
	}
	if err := unix.Mount("proc", proc, "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return "proc", err
	}
	if err := unix.Sethostname([]byte(cfg.Hostname)); err != nil {
		return "hostname", err
	}
	if err := unix.Chroot(cfg.Root); err != nil {
		return "chroot", err
	}
	if err := unix.Chdir("/"); err != nil {
		return "chdir", err
	}
	for c := 0; c <= 63; c++ {
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); errors.Is(err, unix.EINVAL) {
			break
		} else if err != nil {
			return "capabilities", err
		}
	}
	// The credentials change on this thread, the one that execs (exec
	// ends the others).
	if _, _, e := unix.RawSyscall(unix.SYS_SETGROUPS, 0, 0, 0); e != 0 {
		return "setgroups", e
	}
	if _, _, e := unix.RawSyscall(unix.SYS_SETRESGID, uintptr(cfg.GID), uintptr(cfg.GID), uintptr(cfg.GID)); e != 0 {
		return "setresgid", e
	}
	if _, _, e := unix.RawSyscall(unix.SYS_SETRESUID, uintptr(cfg.UID), uintptr(cfg.UID), uintptr(cfg.UID)); e != 0 {
		return "setresuid", e
	}
	unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var caps [2]unix.CapUserData
	if err := unix.Capset(&hdr, &caps[0]); err != nil {
		return "capset", err
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return "no_new_privs", err
	}
	if err := unix.CloseRange(3, math.MaxUint32, unix.CLOSE_RANGE_CLOEXEC); err != nil {
		for fd := 3; fd < 1024; fd++ {
			unix.CloseOnExec(fd)
		}
	}
	for _, fd := range cfg.KeepFDs {
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETFD, 0); err != nil {
			return "keep descriptor", fmt.Errorf("%d: %w", fd, err)
		}
	}
	return "exec", syscall.Exec(cfg.Exec, append([]string{cfg.Exec}, cfg.Args...), cfg.Env)
}

// bind mounts b.Source at b.Target below root, making the mount point
// (a directory or an empty file, as the source is).
func bind(root string, b Bind) error {
	fi, err := os.Stat(b.Source)
	if err != nil {
		return err
	}
	target := filepath.Join(root, b.Target)
	if fi.IsDir() {
		err = os.MkdirAll(target, 0o755)
	} else {
		if err = os.MkdirAll(filepath.Dir(target), 0o755); err == nil {
			var f *os.File
			if f, err = os.OpenFile(target, os.O_CREATE|os.O_WRONLY, 0o644); err == nil {
				f.Close()
			}
		}
	}
	if err != nil {
		return err
	}
	if err := unix.Mount(b.Source, target, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return err
	}
	flags := uintptr(unix.MS_REMOUNT | unix.MS_BIND | unix.MS_NOSUID)
	if b.ReadOnly {
		flags |= unix.MS_RDONLY
	}
	if !fi.Mode().IsRegular() && !fi.IsDir() {
		return unix.Mount("", target, "", flags, "") // a device node: keep dev
	}
	return unix.Mount("", target, "", flags|unix.MS_NODEV, "")
}
