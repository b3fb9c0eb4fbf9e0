package nsinit

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"

	"golang.org/x/sys/unix"
)

// devices are the host device nodes bind-mounted into the sandbox's /dev
// (device nodes cannot be made in a user namespace).
var devices = []string{"null", "zero", "full", "random", "urandom", "tty"}

// devLinks are the symlinks of the sandbox's /dev.
var devLinks = [][2]string{
	{"/proc/self/fd", "fd"},
	{"/proc/self/fd/0", "stdin"},
	{"/proc/self/fd/1", "stdout"},
	{"/proc/self/fd/2", "stderr"},
	{"pts/ptmx", "ptmx"},
}

// maskedFiles describe the host to anyone who may read them and are
// hidden under /dev/null; maskedDirs under an empty read-only tmpfs;
// readOnly are made read-only. (Files only host root may read or write,
// such as kcore, kmsg, sysrq-trigger or /proc/irq, stay as they are: the
// sandbox user cannot become host root, nor any uid but its own.)
var (
	maskedFiles = []string{"keys", "timer_list", "sched_debug", "kallsyms", "config.gz"}
	maskedDirs  = []string{"acpi", "scsi", "asound", "firmware", "driver"}
	readOnly    = []string{"sys"}
)

// setupRoot builds the sandbox's root at cfg.Rootfs in this (new, private)
// mount namespace. Nothing of it propagates to the host.
func setupRoot(cfg *Config) error {
	root := cfg.Rootfs
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make mounts private: %w", err)
	}
	if err := unix.Mount(root, root, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind rootfs: %w", err)
	}
	if err := remount(root, unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV); err != nil {
		return fmt.Errorf("rootfs read-only: %w", err)
	}
	for _, d := range []string{"proc", "dev", "workspace", "tmp"} {
		if fi, err := os.Lstat(filepath.Join(root, d)); err != nil || !fi.IsDir() {
			return fmt.Errorf("the image has no /%s directory to mount on", d)
		}
	}
	if err := setupProc(filepath.Join(root, "proc")); err != nil {
		return err
	}
	if err := setupDev(filepath.Join(root, "dev"), cfg.ShmBytes, cfg.UID); err != nil {
		return err
	}
	// The workspace and /tmp are directories of the host-mounted disk;
	// their mount is nosuid, nodev and noatime already, and the binds keep
	// it so.
	for dst, src := range map[string]string{"workspace": cfg.Workspace, "tmp": cfg.Tmp} {
		if err := unix.Mount(src, filepath.Join(root, dst), "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("bind /%s: %w", dst, err)
		}
	}
	// The volumes, after the workspace and /tmp (one may sit below them):
	// the host made each mount with its flags (nosuid, nodev, read-only
	// for a reader) and its id mapping, and a bind keeps them; coming from
	// a more privileged mount namespace, they are locked here. The mount
	// point was made by the host (below /workspace or /tmp) or checked to
	// be a directory of the image reached through no symbolic link.
	for _, v := range cfg.Volumes {
		if err := unix.Mount(v.Source, filepath.Join(root, v.Target), "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("bind volume at %s: %w", v.Target, err)
		}
	}
	return nil
}

// remount remounts the bind mount at path with flags added to those it
// has. In a user namespace the flags a mount inherited from a more
// privileged one (its atime mode, nosuid, nodev, noexec) are locked, so
// they must be passed again or the remount fails.
func remount(path string, flags uintptr) error {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return err
	}
	keep := map[int64]uintptr{
		unix.ST_RDONLY: unix.MS_RDONLY, unix.ST_NOSUID: unix.MS_NOSUID, unix.ST_NODEV: unix.MS_NODEV,
		unix.ST_NOEXEC: unix.MS_NOEXEC, unix.ST_NOATIME: unix.MS_NOATIME,
		unix.ST_NODIRATIME: unix.MS_NODIRATIME, unix.ST_RELATIME: unix.MS_RELATIME,
	}
	for st1, ms := range keep {
		if st.Flags&st1 != 0 {
			flags |= ms
		}
	}
	return unix.Mount("", path, "", unix.MS_BIND|unix.MS_REMOUNT|flags, "")
}

// setupProc mounts the sandbox's own /proc (it shows only the sandbox's
// PID namespace) and hides what describes the host kernel.
func setupProc(proc string) error {
	if err := unix.Mount("proc", proc, "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("mount /proc: %w", err)
	}
	for _, name := range maskedFiles {
		p := filepath.Join(proc, name)
		if _, err := os.Lstat(p); err != nil {
			continue
		}
		if err := unix.Mount("/dev/null", p, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("mask /proc/%s: %w", name, err)
		}
	}
	for _, name := range maskedDirs {
		p := filepath.Join(proc, name)
		if fi, err := os.Lstat(p); err != nil || !fi.IsDir() {
			continue
		}
		if err := unix.Mount("tmpfs", p, "tmpfs", unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "size=4k,mode=555"); err != nil {
			return fmt.Errorf("mask /proc/%s: %w", name, err)
		}
	}
	for _, name := range readOnly {
		p := filepath.Join(proc, name)
		if _, err := os.Lstat(p); err != nil {
			continue
		}
		if err := unix.Mount(p, p, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("bind /proc/%s: %w", name, err)
		}
		if err := remount(p, unix.MS_RDONLY); err != nil {
			return fmt.Errorf("/proc/%s read-only: %w", name, err)
		}
	}
	return nil
}

// setupDev makes a minimal /dev: a small tmpfs with the host's harmless
// character devices bound in, the usual links, a private devpts and a
// size-capped /dev/shm; then it makes the tmpfs read-only.
func setupDev(dev string, shmBytes int64, uid int) error {
	// This process's own uid (host root) has no mapping in the sandbox's
	// user namespace, and a file system mounted there refuses to create
	// files for an unmapped owner: they are made as the sandbox user, in
	// a tmpfs it owns (read-only once it is ready), from inside it (the
	// sandbox user cannot search the host directories on the way).
	if err := unix.Mount("tmpfs", dev, "tmpfs", unix.MS_NOSUID|unix.MS_NOEXEC|unix.MS_NODEV,
		fmt.Sprintf("mode=755,size=64k,nr_inodes=64,uid=%d,gid=%d", uid, uid)); err != nil {
		return fmt.Errorf("mount /dev: %w", err)
	}
	if err := unix.Chdir(dev); err != nil {
		return err
	}
	if err := asUser(uid, func() error { return populateDev(shmBytes) }); err != nil {
		return err
	}
	if err := unix.Chdir("/"); err != nil {
		return err
	}
	if err := remount(dev, unix.MS_RDONLY); err != nil {
		return fmt.Errorf("/dev read-only: %w", err)
	}
	return nil
}

// asUser runs fn with the file system uid and gid of the sandbox user, on
// a thread of its own: the change cannot be undone (host root has no uid
// in the sandbox's user namespace to change back to), so the thread ends
// with it. The working directory is shared with the other threads.
func asUser(uid int, fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread exits with the goroutine
		if err := unix.Setfsgid(uid); err != nil {
			errc <- err
			return
		}
		if err := unix.Setfsuid(uid); err != nil {
			errc <- err
			return
		}
		errc <- fn()
	}()
	return <-errc
}

// populateDev fills the current directory, the new /dev.
func populateDev(shmBytes int64) error {
	for _, name := range devices {
		if err := os.WriteFile(name, nil, 0o666); err != nil {
			return fmt.Errorf("/dev/%s: %w", name, err)
		}
		if err := unix.Mount("/dev/"+name, name, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("bind /dev/%s: %w", name, err)
		}
	}
	for _, l := range devLinks {
		if err := os.Symlink(l[0], l[1]); err != nil {
			return fmt.Errorf("/dev/%s: %w", l[1], err)
		}
	}
	for _, d := range []string{"pts", "shm"} {
		if err := os.Mkdir(d, 0o755); err != nil {
			return fmt.Errorf("/dev/%s: %w", d, err)
		}
	}
	if err := unix.Mount("devpts", "pts", "devpts", unix.MS_NOSUID|unix.MS_NOEXEC,
		"newinstance,ptmxmode=0666,mode=0620"); err != nil {
		return fmt.Errorf("mount /dev/pts: %w", err)
	}
	if err := unix.Mount("shm", "shm", "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC,
		fmt.Sprintf("mode=1777,size=%d", shmBytes)); err != nil {
		return fmt.Errorf("mount /dev/shm: %w", err)
	}
	return nil
}

// pivot makes root the root of this mount namespace and detaches the old
// one, so nothing of the host's file systems stays reachable.
func pivot(root string) error {
	if err := unix.Chdir(root); err != nil {
		return err
	}
	// pivot_root(".", ".") stacks the old root on top of the new one;
	// detaching it leaves the new one.
	if err := unix.PivotRoot(".", "."); err != nil {
		return fmt.Errorf("pivot_root: %w", err)
	}
	if err := unix.Unmount(".", unix.MNT_DETACH); err != nil {
		return fmt.Errorf("detach the old root: %w", err)
	}
	return unix.Chdir("/")
}

// loopbackUp brings lo up in the sandbox's network namespace.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return err
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil && !errors.Is(err, unix.EEXIST) {
		return err
	}
	return nil
}
