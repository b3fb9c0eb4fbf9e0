package loopdisk

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Inodes is the inode count of a disk of sizeBytes: one per 8 KiB, at
// least 1024 and at most 262144.
func Inodes(sizeBytes int64) int64 {
	n := sizeBytes / 8192
	if n < 1024 {
		n = 1024
	}
	if n > 262144 {
		n = 262144
	}
	return n
}

// Format creates image (which must not exist) as a sparse file of
// sizeBytes formatted as ext4 without a journal (it is scratch space).
func Format(ctx context.Context, image string, sizeBytes int64) error {
	f, err := os.OpenFile(image, os.O_CREATE|os.O_EXCL|os.O_RDWR, 0o600)
	if err != nil {
		return fmt.Errorf("loopdisk: disk image: %w", err)
	}
	defer f.Close()
	if err := f.Truncate(sizeBytes); err != nil {
		return fmt.Errorf("loopdisk: disk image: %w", err)
	}
	// mke2fs is the tool for this job; there is no maintained Go ext4
	// formatter.
	out, err := exec.CommandContext(ctx, "mkfs.ext4", "-q", "-F", "-O", "^has_journal",
		"-E", "lazy_itable_init=1,nodiscard", "-N", strconv.FormatInt(Inodes(sizeBytes), 10), "-m", "0", image).CombinedOutput()
	if err != nil {
		return fmt.Errorf("loopdisk: mkfs.ext4: %w: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}

// Mount mounts the ext4 image at dir through a loop device (nosuid, nodev,
// noatime) and removes its lost+found. The loop device is released when
// the mount goes (autoclear).
//
// noinit_itable keeps the kernel from zeroing the inode tables that
// mkfs left uninitialised (lazy_itable_init) in the background: in a
// sparse file they read as zeros already, and zeroing them would write
// megabytes per sandbox.
func Mount(ctx context.Context, dir, image string) error {
	f, err := os.OpenFile(image, os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("loopdisk: disk image: %w", err)
	}
	defer f.Close()
	// A loop device freed a moment ago by another sandbox can still fail
	// its first reads (EIO); take another one then.
	var merr error
	for attempt := 0; attempt < 5; attempt++ {
		loop, lf, err := attachLoop(f, false)
		if err != nil {
			return err
		}
		// Mount before closing the device: with autoclear, the last
		// close of an unmounted loop device detaches it.
		merr = unix.Mount(loop, dir, "ext4", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOATIME, "noinit_itable")
		if merr == nil {
			lf.Close()
			os.Remove(filepath.Join(dir, "lost+found"))
			return nil
		}
		lf.Close()
		merr = fmt.Errorf("loopdisk: mount %s at %s: %w", loop, dir, merr)
		if !errors.Is(merr, unix.EIO) {
			break
		}
		select {
		case <-ctx.Done():
			return errors.Join(merr, ctx.Err())
		case <-time.After(time.Duration(attempt+1) * 10 * time.Millisecond):
		}
	}
	return merr
}

// MountReadOnly mounts the ext4 image at dir read-only (nosuid, nodev,
// noexec, noatime) for the host to read a disk that something it does not
// trust wrote, such as a microVM's guest. The image is opened read-only
// and bound to a read-only loop device, and the file system is mounted
// with noload: the host kernel writes nothing to the disk, and neither
// replays a journal the writer left (which would have it apply whatever
// the journal holds) nor processes its orphan list. The loop device is
// released when the mount goes (autoclear).
func MountReadOnly(ctx context.Context, dir, image string) error {
	f, err := os.Open(image)
	if err != nil {
		return fmt.Errorf("loopdisk: disk image: %w", err)
	}
	defer f.Close()
	var merr error
	for attempt := 0; attempt < 5; attempt++ {
		loop, lf, err := attachLoop(f, true)
		if err != nil {
			return err
		}
		merr = unix.Mount(loop, dir, "ext4", unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC|unix.MS_NOATIME, "noload")
		lf.Close()
		if merr == nil {
			return nil
		}
		merr = fmt.Errorf("loopdisk: mount %s read-only at %s: %w", loop, dir, merr)
		if !errors.Is(merr, unix.EIO) {
			break
		}
		select {
		case <-ctx.Done():
			return errors.Join(merr, ctx.Err())
		case <-time.After(time.Duration(attempt+1) * 10 * time.Millisecond):
		}
	}
	return merr
}

// attachLoop binds f to a free loop device with autoclear set (and
// read-only if asked). It returns the device open: closing it before
// mounting detaches it again.
func attachLoop(f *os.File, readOnly bool) (string, *os.File, error) {
	ctl, err := os.OpenFile("/dev/loop-control", os.O_RDWR, 0)
	if err != nil {
		return "", nil, fmt.Errorf("loopdisk: loop control: %w", err)
	}
	defer ctl.Close()
	for attempt := 0; attempt < 20; attempt++ {
		n, err := unix.IoctlRetInt(int(ctl.Fd()), unix.LOOP_CTL_GET_FREE)
		if err != nil {
			return "", nil, fmt.Errorf("loopdisk: no free loop device: %w", err)
		}
		dev := fmt.Sprintf("/dev/loop%d", n)
		mode := os.O_RDWR
		if readOnly {
			mode = os.O_RDONLY
		}
		lf, err := os.OpenFile(dev, mode, 0)
		if err != nil {
			return "", nil, fmt.Errorf("loopdisk: open %s: %w", dev, err)
		}
		cfg := unix.LoopConfig{Fd: uint32(f.Fd())}
		cfg.Info.Flags = unix.LO_FLAGS_AUTOCLEAR
		if readOnly {
			cfg.Info.Flags |= unix.LO_FLAGS_READ_ONLY
		}
		err = unix.IoctlLoopConfigure(int(lf.Fd()), &cfg)
		if err == nil {
			return dev, lf, nil
		}
		lf.Close()
		if !errors.Is(err, unix.EBUSY) {
			return "", nil, fmt.Errorf("loopdisk: configure %s: %w", dev, err)
		}
		// Another process took this device between GET_FREE and
		// CONFIGURE: ask again.
	}
	return "", nil, fmt.Errorf("loopdisk: loop devices stayed busy")
}
