package gvisor

import (
	"bufio"
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

// mountDisk gives a sandbox its writable storage: a sparse file on the
// host formatted as ext4 (no journal: it is scratch space) and mounted
// through a loop device at dir. The host kernel enforces its size and
// inode count. Unlike a tmpfs, its pages are ordinary page cache that the
// kernel can write back, so a full disk does not eat the sandbox's memory
// limit. The loop device is released when the mount goes (autoclear).
func mountDisk(ctx context.Context, dir, image string, sizeBytes int64) error {
	inodes := sizeBytes / 8192
	if inodes < 1024 {
		inodes = 1024
	}
	if inodes > 262144 {
		inodes = 262144
	}
	f, err := os.OpenFile(image, os.O_CREATE|os.O_EXCL|os.O_RDWR, 0o600)
	if err != nil {
		return fmt.Errorf("gvisor: disk image: %w", err)
	}
	defer f.Close()
	if err := f.Truncate(sizeBytes); err != nil {
		return fmt.Errorf("gvisor: disk image: %w", err)
	}
	// mke2fs is the tool for this job; there is no maintained Go ext4
	// formatter.
	out, err := exec.CommandContext(ctx, "mkfs.ext4", "-q", "-F", "-O", "^has_journal",
		"-E", "lazy_itable_init=1,nodiscard", "-N", strconv.FormatInt(inodes, 10), "-m", "0", image).CombinedOutput()
	if err != nil {
		return fmt.Errorf("gvisor: mkfs.ext4: %w: %s", err, strings.TrimSpace(string(out)))
	}
	// A loop device freed a moment ago by another sandbox can still fail
	// its first reads (EIO); take another one then.
	var merr error
	for attempt := 0; attempt < 5; attempt++ {
		loop, lf, err := attachLoop(f)
		if err != nil {
			return err
		}
		// Mount before closing the device: with autoclear, the last
		// close of an unmounted loop device detaches it.
		merr = unix.Mount(loop, dir, "ext4", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOATIME, "")
		if merr == nil {
			lf.Close()
			os.Remove(filepath.Join(dir, "lost+found"))
			return nil
		}
		lf.Close()
		merr = fmt.Errorf("gvisor: mount %s at %s: %w", loop, dir, merr)
		if !errors.Is(merr, unix.EIO) {
			break
		}
		time.Sleep(time.Duration(attempt+1) * 10 * time.Millisecond)
	}
	return merr
}

// attachLoop binds f to a free loop device with autoclear set. It returns
// the device open: closing it before mounting detaches it again.
func attachLoop(f *os.File) (string, *os.File, error) {
	ctl, err := os.OpenFile("/dev/loop-control", os.O_RDWR, 0)
	if err != nil {
		return "", nil, fmt.Errorf("gvisor: loop control: %w", err)
	}
	defer ctl.Close()
	for attempt := 0; attempt < 20; attempt++ {
		n, err := unix.IoctlRetInt(int(ctl.Fd()), unix.LOOP_CTL_GET_FREE)
		if err != nil {
			return "", nil, fmt.Errorf("gvisor: no free loop device: %w", err)
		}
		dev := fmt.Sprintf("/dev/loop%d", n)
		lf, err := os.OpenFile(dev, os.O_RDWR, 0)
		if err != nil {
			return "", nil, fmt.Errorf("gvisor: open %s: %w", dev, err)
		}
		cfg := unix.LoopConfig{Fd: uint32(f.Fd())}
		cfg.Info.Flags = unix.LO_FLAGS_AUTOCLEAR
		err = unix.IoctlLoopConfigure(int(lf.Fd()), &cfg)
		if err == nil {
			return dev, lf, nil
		}
		lf.Close()
		if !errors.Is(err, unix.EBUSY) {
			return "", nil, fmt.Errorf("gvisor: configure %s: %w", dev, err)
		}
		// Another process took this device between GET_FREE and
		// CONFIGURE: ask again.
	}
	return "", nil, fmt.Errorf("gvisor: loop devices stayed busy")
}

// unmountAll unmounts every mount at or below dir, deepest first.
func unmountAll(dir string) error {
	mounts, err := mountsUnder(dir)
	if err != nil {
		return err
	}
	var errs []error
	for i := len(mounts) - 1; i >= 0; i-- {
		m := mounts[i]
		if err := unix.Unmount(m, 0); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
			if err2 := unix.Unmount(m, unix.MNT_DETACH); err2 != nil {
				errs = append(errs, fmt.Errorf("unmount %s: %w", m, err))
			}
		}
	}
	return errors.Join(errs...)
}

// mountsUnder lists mount points at or below dir, in mount order.
func mountsUnder(dir string) ([]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		mp := unescapeMount(fields[4])
		if mp == dir || strings.HasPrefix(mp, dir+"/") {
			out = append(out, mp)
		}
	}
	return out, sc.Err()
}

// unescapeMount decodes the octal escapes of mountinfo (\040 for space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
