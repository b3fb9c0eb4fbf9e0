package guest

import (
	"github.com/airlockhq/airlock/internal/guestabi"

	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/airlockhq/airlock/internal/harden"
)

// maxOpenFiles is RLIMIT_NOFILE inside the guest, as in the other
// backends.
const maxOpenFiles = 4096

// defaultNproc is RLIMIT_NPROC when the host set none.
const defaultNproc = 256

// agentTasks is room for the agent's own threads on top of the
// sandbox's process limit (RLIMIT_NPROC counts the agent's threads too).
const agentTasks = 32

// RunIfAsked runs the guest's init when this process is PID 1 started as
// guestabi.InitPath with a Config in place, and never returns then: it execs the
// agent, or powers the guest off after logging the failure to the
// console. Call it first thing in main.
func RunIfAsked() {
	if len(os.Args) == 2 && os.Args[0] == guestabi.InitPath && os.Args[1] == reseederArg && os.Getppid() == 1 {
		runReseeder() // never returns
	}
	if os.Getpid() != 1 || len(os.Args) == 0 || os.Args[0] != guestabi.InitPath {
		return
	}
	if _, err := os.Stat(guestabi.ConfigPath); err != nil {
		return
	}
	runtime.LockOSThread()
	stage, err := run()
	fmt.Fprintf(os.Stderr, "airlock guest init: %s: %v\n", stage, err)
	unix.Sync()
	unix.Reboot(unix.LINUX_REBOOT_CMD_POWER_OFF)
	os.Exit(1)
}

func run() (string, error) {
	cfg, err := readConfig()
	if err != nil {
		return "config", err
	}
	if stage, err := mountEarly(&cfg); err != nil {
		return stage, err
	}
	cmdline, _ := os.ReadFile("/proc/cmdline")
	nproc := guestabi.CmdlineInt(string(cmdline), guestabi.ParamNproc, defaultNproc) + agentTasks
	netCfg, err := guestabi.ParseNet(string(cmdline))
	if err != nil {
		return "network", err
	}
	devs, stage, err := findDevices(&cfg)
	if err != nil {
		return stage, err
	}
	port, stage, err := enterRoot(&cfg, devs, netCfg)
	if err != nil {
		return stage, err
	}
	if stage, err := dropPrivileges(&cfg, nproc); err != nil {
		return stage, err
	}
	for _, fd := range []int{0, 1} {
		if err := unix.Dup3(port, fd, 0); err != nil {
			return "stdio", err
		}
	}
	if err := unix.CloseRange(3, math.MaxUint32, unix.CLOSE_RANGE_CLOEXEC); err != nil {
		for fd := 3; fd < 1024; fd++ {
			unix.CloseOnExec(fd)
		}
	}
	if err := harden.InstallSeccomp(); err != nil {
		return "seccomp", err
	}
	if err := unix.Chdir("/workspace"); err != nil {
		return "cwd", err
	}
	return "exec agent", syscall.Exec(cfg.Agent, []string{cfg.Agent}, cfg.Env)
}

// readConfig reads and checks the Config the host put in the initramfs.
func readConfig() (guestabi.Config, error) {
	var cfg guestabi.Config
	data, err := os.ReadFile(guestabi.ConfigPath)
	if err != nil {
		return cfg, err
	}
	if err := json.Unmarshal(data, &cfg); err != nil {
		return cfg, err
	}
	return cfg, cfg.Validate()
}

// mountEarly mounts /proc and the initramfs's /dev, loads the modules
// and sets the sysctls. On failure it names the stage.
func mountEarly(cfg *guestabi.Config) (string, error) {
	os.MkdirAll("/proc", 0o555)
	if err := unix.Mount("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return "mount /proc", err
	}
	os.MkdirAll("/dev", 0o755)
	if err := unix.Mount("devtmpfs", "/dev", "devtmpfs", unix.MS_NOSUID|unix.MS_NOEXEC, "mode=0755"); err != nil {
		return "mount /dev", err
	}
	for _, m := range cfg.Modules {
		if err := loadModule(m); err != nil {
			return "modules", err
		}
	}
	if err := setSysctls(); err != nil {
		return "sysctls", err
	}
	return "", nil
}

// guestDevices are the device nodes of the guest's disks and ports.
type guestDevices struct {
	root, scratch, port, reseed string // reseed: "" without a reseed port
}

// findDevices waits (with /sys mounted for the while) until the disks
// and ports of cfg's serials and names appear. On failure it names the
// stage.
func findDevices(cfg *guestabi.Config) (guestDevices, string, error) {
	var d guestDevices
	os.MkdirAll("/sys", 0o555)
	if err := unix.Mount("sysfs", "/sys", "sysfs", unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return d, "mount /sys", err
	}
	err := waitFor(20*time.Second, func() bool {
		d.root = findDevice("/sys/block/vd*/serial", cfg.RootSerial)
		d.scratch = findDevice("/sys/block/vd*/serial", cfg.ScratchSerial)
		d.port = findDevice("/sys/class/virtio-ports/vport*/name", cfg.Port)
		if cfg.ReseedPort != "" {
			d.reseed = findDevice("/sys/class/virtio-ports/vport*/name", cfg.ReseedPort)
		}
		return d.root != "" && d.scratch != "" && d.port != "" && (cfg.ReseedPort == "" || d.reseed != "")
	})
	if err != nil {
		return d, "devices", fmt.Errorf("root disk %q, scratch disk %q, port %q: %w", d.root, d.scratch, d.port, err)
	}
	if err := unix.Unmount("/sys", 0); err != nil {
		return d, "unmount /sys", err
	}
	return d, "", nil
}

// enterRoot mounts the root and scratch disks, opens the agent's port,
// starts the reseeder, leaves the initramfs for the new root and brings
// its network up. It returns the port's descriptor, or on failure names
// the stage.
func enterRoot(cfg *guestabi.Config, devs guestDevices, netCfg *guestabi.NetConfig) (int, string, error) {
	if err := setupRoot(cfg, devs.root, devs.scratch); err != nil {
		return -1, "mounts", err
	}
	port, err := unix.Open(devs.port, unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, "port", err
	}
	if devs.reseed != "" {
		if err := startReseeder(devs.reseed); err != nil {
			return -1, "reseeder", err
		}
	}
	// The initramfs's devtmpfs shows every device of the guest: it goes
	// before the agent runs (the port stays open).
	if err := unix.Unmount("/dev", unix.MNT_DETACH); err != nil {
		return -1, "unmount devtmpfs", err
	}
	if err := unix.Unmount("/proc", unix.MNT_DETACH); err != nil {
		return -1, "unmount /proc", err
	}
	if netCfg != nil {
		if err := bindResolvConf("/newroot", netCfg.ResolvConf); err != nil {
			return -1, "resolv.conf", err
		}
	}
	if err := switchRoot("/newroot"); err != nil {
		return -1, "switch root", err
	}
	if err := unix.Sethostname([]byte(cfg.Hostname)); err != nil {
		return -1, "hostname", err
	}
	if err := loopbackUp(); err != nil {
		return -1, "loopback", err
	}
	if netCfg != nil {
		if err := networkUp(netCfg); err != nil {
			return -1, "network", err
		}
	}
	return port, "", nil
}

// dropPrivileges sets the rlimits (nproc processes), drops the
// capability bounding set, becomes cfg's user and group with no
// capabilities, and sets no_new_privs. On failure it names the stage.
func dropPrivileges(cfg *guestabi.Config, nproc int64) (string, error) {
	for _, r := range []struct {
		res int
		n   uint64
	}{{unix.RLIMIT_NPROC, uint64(nproc)}, {unix.RLIMIT_NOFILE, maxOpenFiles}, {unix.RLIMIT_CORE, 0}} {
		if err := unix.Setrlimit(r.res, &unix.Rlimit{Cur: r.n, Max: r.n}); err != nil {
			return "rlimits", err
		}
	}
	// The bounding set goes while this thread may still change it.
	if err := dropBounding(); err != nil {
		return "capabilities", err
	}
	if _, _, errno := unix.RawSyscall(unix.SYS_SETGROUPS, 0, 0, 0); errno != 0 {
		return "credentials", fmt.Errorf("setgroups: %w", errno)
	}
	if _, _, errno := unix.RawSyscall(unix.SYS_SETRESGID, uintptr(cfg.GID), uintptr(cfg.GID), uintptr(cfg.GID)); errno != 0 {
		return "credentials", fmt.Errorf("setresgid: %w", errno)
	}
	if _, _, errno := unix.RawSyscall(unix.SYS_SETRESUID, uintptr(cfg.UID), uintptr(cfg.UID), uintptr(cfg.UID)); errno != 0 {
		return "credentials", fmt.Errorf("setresuid: %w", errno)
	}
	if err := dropCapabilities(); err != nil {
		return "capabilities", err
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return "no_new_privs", err
	}
	return "", nil
}

// loadModule loads one kernel module; one already there is fine.
func loadModule(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := unix.FinitModule(int(f.Fd()), "", 0); err != nil && !errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("%s: %w", filepath.Base(path), err)
	}
	return nil
}

// sysctls harden the guest kernel once its modules are in. The sandbox
// user is not root, so most of these only back up what it cannot do
// anyway; a sysctl this kernel lacks is skipped.
var sysctls = [][2]string{
	{"kernel/modules_disabled", "1"},
	{"kernel/dmesg_restrict", "1"},
	{"kernel/kptr_restrict", "2"},
	{"kernel/unprivileged_bpf_disabled", "1"},
	{"kernel/perf_event_paranoid", "3"},
	{"kernel/unprivileged_userns_clone", "0"},
	{"kernel/yama/ptrace_scope", "2"},
	{"kernel/sysrq", "0"},
	{"vm/unprivileged_userfaultfd", "0"},
	// Allocations always succeed and the OOM killer enforces the memory
	// limit on touch, as on the hosts of the other backends (a guest as
	// small as its limit would otherwise refuse big allocations up
	// front).
	{"vm/overcommit_memory", "1"},
	{"fs/protected_symlinks", "1"},
	{"fs/protected_hardlinks", "1"},
	{"fs/suid_dumpable", "0"},
}

func setSysctls() error {
	for _, s := range sysctls {
		err := os.WriteFile(filepath.Join("/proc/sys", s[0]), []byte(s[1]), 0)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("%s: %w", s[0], err)
		}
	}
	return nil
}

// waitFor polls until ok (devices appear as their drivers find them).
func waitFor(d time.Duration, ok func() bool) error {
	deadline := time.Now().Add(d)
	for !ok() {
		if time.Now().After(deadline) {
			return fmt.Errorf("not there after %v", d)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return nil
}

// findDevice returns /dev/<name> of the first sysfs entry matching glob
// (.../<name>/attribute) whose attribute holds want, once its device node
// exists; "" if none does yet.
func findDevice(glob, want string) string {
	ms, _ := filepath.Glob(glob)
	for _, m := range ms {
		b, err := os.ReadFile(m)
		if err != nil || strings.TrimSpace(string(b)) != want {
			continue
		}
		dev := "/dev/" + filepath.Base(filepath.Dir(m))
		if _, err := os.Stat(dev); err == nil {
			return dev
		}
	}
	return ""
}

// setupRoot mounts the root disk at /newroot and everything below it.
func setupRoot(cfg *guestabi.Config, rootDev, scratchDev string) error {
	const root, scratch = "/newroot", "/scratch"
	for _, d := range []string{root, scratch} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return err
		}
	}
	if err := unix.Mount(rootDev, root, "ext4", unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV, "noload"); err != nil {
		return fmt.Errorf("root disk %s: %w", rootDev, err)
	}
	if err := unix.Mount(scratchDev, scratch, "ext4", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOATIME, ""); err != nil {
		return fmt.Errorf("scratch disk %s: %w", scratchDev, err)
	}
	os.Remove(filepath.Join(scratch, "lost+found"))
	for _, d := range []struct {
		name string
		mode os.FileMode
		uid  int
	}{{"workspace", 0o755, cfg.UID}, {"tmp", 0o1777, 0}} {
		p := filepath.Join(scratch, d.name)
		if err := os.Mkdir(p, d.mode); err != nil && !errors.Is(err, os.ErrExist) {
			return err
		}
		if err := os.Chmod(p, d.mode); err != nil {
			return err
		}
		if err := os.Lchown(p, d.uid, d.uid); err != nil {
			return err
		}
		if err := unix.Mount(p, filepath.Join(root, "/"+d.name), "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("bind %s: %w", d.name, err)
		}
	}
	if err := unix.Unmount(scratch, unix.MNT_DETACH); err != nil {
		return err
	}
	// hidepid: the guest kernel's own threads (root's) are not the
	// sandbox's business; the sandbox user sees its own processes.
	if err := unix.Mount("proc", filepath.Join(root, "proc"), "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "hidepid=invisible"); err != nil {
		return fmt.Errorf("mount /proc: %w", err)
	}
	if err := unix.Mount("sysfs", filepath.Join(root, "sys"), "sysfs", unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("mount /sys: %w", err)
	}
	return setupDev(filepath.Join(root, "dev"))
}

// devices are the character devices of the guest's /dev (major, minor).
var devices = []struct {
	name         string
	major, minor uint32
}{{"null", 1, 3}, {"zero", 1, 5}, {"full", 1, 7}, {"random", 1, 8}, {"urandom", 1, 9}, {"tty", 5, 0}}

var devLinks = [][2]string{
	{"/proc/self/fd", "fd"},
	{"/proc/self/fd/0", "stdin"},
	{"/proc/self/fd/1", "stdout"},
	{"/proc/self/fd/2", "stderr"},
	{"pts/ptmx", "ptmx"},
}

// setupDev makes a minimal /dev, read-only once made.
func setupDev(dev string) error {
	if err := unix.Mount("tmpfs", dev, "tmpfs", unix.MS_NOSUID|unix.MS_NOEXEC, "mode=755,size=64k,nr_inodes=64"); err != nil {
		return fmt.Errorf("mount /dev: %w", err)
	}
	for _, d := range devices {
		if err := unix.Mknod(filepath.Join(dev, d.name), unix.S_IFCHR|0o666, int(unix.Mkdev(d.major, d.minor))); err != nil {
			return fmt.Errorf("/dev/%s: %w", d.name, err)
		}
		os.Chmod(filepath.Join(dev, d.name), 0o666)
	}
	for _, l := range devLinks {
		if err := os.Symlink(l[0], filepath.Join(dev, l[1])); err != nil {
			return err
		}
	}
	for _, d := range []string{"pts", "shm"} {
		if err := os.Mkdir(filepath.Join(dev, d), 0o755); err != nil {
			return err
		}
	}
	if err := unix.Mount("devpts", filepath.Join(dev, "pts"), "devpts", unix.MS_NOSUID|unix.MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0620"); err != nil {
		return fmt.Errorf("mount /dev/pts: %w", err)
	}
	if err := unix.Mount("shm", filepath.Join(dev, "shm"), "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "mode=1777,size=64m"); err != nil {
		return fmt.Errorf("mount /dev/shm: %w", err)
	}
	return unix.Mount("", dev, "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NOEXEC, "")
}

// switchRoot makes root the root: the initramfs stays below it, out of
// reach (chroot needs a capability the sandbox user never has).
func switchRoot(root string) error {
	if err := unix.Chdir(root); err != nil {
		return err
	}
	if err := unix.Mount(".", "/", "", unix.MS_MOVE, ""); err != nil {
		return fmt.Errorf("move root: %w", err)
	}
	if err := unix.Chroot("."); err != nil {
		return err
	}
	return unix.Chdir("/")
}

// loopbackUp brings lo up.
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
	return unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr)
}

// dropBounding empties the bounding set, so no exec can bring a
// capability back.
func dropBounding() error {
	for c := 0; c <= 63; c++ {
		err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0)
		if errors.Is(err, unix.EINVAL) {
			break
		}
		if err != nil {
			return fmt.Errorf("drop bounding capability %d: %w", c, err)
		}
	}
	return nil
}

// dropCapabilities empties the ambient, inheritable, permitted and
// effective sets (the change of uid from root has emptied the last two).
func dropCapabilities() error {
	unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	return unix.Capset(&hdr, &data[0])
}
