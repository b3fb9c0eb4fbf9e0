package nsinit

import (
	"errors"
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Landlock rights by the ABI version that introduced them.
const (
	fsRightsV1 = unix.LANDLOCK_ACCESS_FS_EXECUTE | unix.LANDLOCK_ACCESS_FS_WRITE_FILE |
		unix.LANDLOCK_ACCESS_FS_READ_FILE | unix.LANDLOCK_ACCESS_FS_READ_DIR |
		unix.LANDLOCK_ACCESS_FS_REMOVE_DIR | unix.LANDLOCK_ACCESS_FS_REMOVE_FILE |
		unix.LANDLOCK_ACCESS_FS_MAKE_CHAR | unix.LANDLOCK_ACCESS_FS_MAKE_DIR |
		unix.LANDLOCK_ACCESS_FS_MAKE_REG | unix.LANDLOCK_ACCESS_FS_MAKE_SOCK |
		unix.LANDLOCK_ACCESS_FS_MAKE_FIFO | unix.LANDLOCK_ACCESS_FS_MAKE_BLOCK |
		unix.LANDLOCK_ACCESS_FS_MAKE_SYM
	fsRefer    = unix.LANDLOCK_ACCESS_FS_REFER     // ABI 2
	fsTruncate = unix.LANDLOCK_ACCESS_FS_TRUNCATE  // ABI 3
	fsIoctlDev = unix.LANDLOCK_ACCESS_FS_IOCTL_DEV // ABI 5
	// ABI 6 adds scopes: no signals to, and no connections to abstract
	// unix sockets of, processes outside the sandbox's domain.
	scopes = unix.LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET | unix.LANDLOCK_SCOPE_SIGNAL

	fsRead  = unix.LANDLOCK_ACCESS_FS_READ_FILE | unix.LANDLOCK_ACCESS_FS_READ_DIR
	fsWrite = unix.LANDLOCK_ACCESS_FS_WRITE_FILE | fsTruncate
)

// landlockRule grants rights beneath a path of the new root.
type landlockRule struct {
	path   string
	rights uint64
}

// landlockRules: the image is readable and executable, the workspace,
// /tmp and /dev/shm are the only places files can be made, and /proc and
// the device nodes can be read and written but not created.
var landlockRules = []landlockRule{
	{"/", fsRead | unix.LANDLOCK_ACCESS_FS_EXECUTE},
	{"/workspace", fsRightsV1 | fsRefer | fsTruncate},
	{"/tmp", fsRightsV1 | fsRefer | fsTruncate},
	{"/dev/shm", fsRightsV1 | fsRefer | fsTruncate},
	{"/dev", fsRead | fsWrite | fsIoctlDev},
	{"/proc", fsRead | fsWrite},
}

// volumeRules let the sandbox make files in the volumes it writes (a
// reader's mount is read-only, and "/" grants reading already).
func volumeRules(vs []Volume) []landlockRule {
	var out []landlockRule
	for _, v := range vs {
		if !v.ReadOnly {
			out = append(out, landlockRule{v.Target, fsRightsV1 | fsRefer | fsTruncate})
		}
	}
	return out
}

// LandlockABI returns the Landlock ABI version the kernel offers, 0 when
// it offers none (too old, or not enabled).
func LandlockABI() int {
	v, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	if errno != 0 {
		return 0
	}
	return int(v)
}

// applyLandlock restricts the calling thread (and what it execs) to
// rules, with the rights the kernel's ABI knows. It returns the ABI
// applied, 0 if none. no_new_privs must be set.
func applyLandlock(rules []landlockRule) (int, error) {
	abi := LandlockABI()
	if abi <= 0 {
		return 0, nil
	}
	handled := uint64(fsRightsV1)
	if abi >= 2 {
		handled |= fsRefer
	}
	if abi >= 3 {
		handled |= fsTruncate
	}
	if abi >= 5 {
		handled |= fsIoctlDev
	}
	attr := unix.LandlockRulesetAttr{Handled_access_fs: handled}
	// The struct as far as Scoped (ABI 6); the quiet_* members after it
	// are left out, as this code sets none of them.
	size := unsafe.Offsetof(attr.Quiet_access_fs)
	if abi >= 6 {
		attr.Scoped = scopes
	} else {
		// Older kernels know a shorter struct: Handled_access_fs (ABI
		// 1-3), then Handled_access_net (ABI 4).
		size = unsafe.Offsetof(attr.Scoped)
		if abi < 4 {
			size = unsafe.Offsetof(attr.Handled_access_net)
		}
	}
	fd, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, uintptr(unsafe.Pointer(&attr)), size, 0)
	if errno != 0 {
		return 0, fmt.Errorf("landlock: create ruleset: %w", errno)
	}
	defer unix.Close(int(fd))
	for _, r := range rules {
		if err := addPathRule(int(fd), r.path, r.rights&handled); err != nil {
			return 0, err
		}
	}
	if _, _, errno := unix.Syscall(unix.SYS_LANDLOCK_RESTRICT_SELF, fd, 0, 0); errno != 0 {
		return 0, fmt.Errorf("landlock: restrict self: %w", errno)
	}
	return abi, nil
}

func addPathRule(ruleset int, path string, rights uint64) error {
	fd, err := unix.Open(path, unix.O_PATH|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) {
		return nil // nothing there to grant
	}
	if err != nil {
		return fmt.Errorf("landlock: open %s: %w", path, err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("landlock: stat %s: %w", path, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		// Rights that only make sense beneath a directory are refused on
		// a file.
		rights &= unix.LANDLOCK_ACCESS_FS_EXECUTE | unix.LANDLOCK_ACCESS_FS_WRITE_FILE |
			unix.LANDLOCK_ACCESS_FS_READ_FILE | fsTruncate | fsIoctlDev
	}
	attr := unix.LandlockPathBeneathAttr{Allowed_access: rights, Parent_fd: int32(fd)}
	// The kernel's struct is packed: 8 bytes of rights, then the fd.
	if _, _, errno := unix.Syscall6(unix.SYS_LANDLOCK_ADD_RULE, uintptr(ruleset), unix.LANDLOCK_RULE_PATH_BENEATH,
		uintptr(unsafe.Pointer(&attr)), 0, 0, 0); errno != 0 {
		return fmt.Errorf("landlock: rule for %s: %w", path, errno)
	}
	return nil
}
